"""The pytest benchmark suite: DynamicEmb against TorchRec/FBGEMM TBE (DESIGN.md)."""
