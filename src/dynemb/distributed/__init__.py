"""Row-wise sharding of dynamic embedding tables over the ranks of a process group."""

from dynemb.distributed.collection import ShardedDynamicEmbeddingCollection, shard_options
from dynemb.distributed.routing import OwnerPolicy, owner_of

__all__ = ["OwnerPolicy", "ShardedDynamicEmbeddingCollection", "owner_of", "shard_options"]
