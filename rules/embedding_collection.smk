# The multi-GPU EmbeddingCollection benchmark (issue 9) as a config family of
# its own, read from config/embedding_collection.yaml (the working directory's,
# else this checkout's); not part of all/report.
#   snakemake --cores 1 embedding_collection
from benchmark.embedding_collection.family import FamilyError, load_family

_EC_CONFIG = Path("config", "embedding_collection.yaml")
try:
    EC = load_family(_EC_CONFIG if _EC_CONFIG.is_file() else WORKFLOW_ROOT / _EC_CONFIG)
except FamilyError as exc:
    raise WorkflowError(str(exc)) from None
# The launcher runs in the checkout, so it is handed absolute paths (realpath).
EC_LAUNCHER = shlex.quote(str(WORKFLOW_ROOT / "benchmark" / "benchmark_embedding_collection.sh"))


wildcard_constraints:
    ec_run="|".join(EC.runs),


rule embedding_collection:
    input:
        L.ec_results,
        [L.ec_opcalls(run) for run in (EC.runs if EC.profile else [])],


rule ec_timing:
    # One timed run: every rank of one torchrun, one record.
    output:
        update(L.ec_timing(EC_RUN)),
    params:
        args=lambda wildcards: EC.launcher_args(wildcards.ec_run),
        env=EC.env(),
        launcher=EC_LAUNCHER,
    log:
        L.log("embedding_collection/timing", EC_RUN),
    conda:
        "../envs/benchmark.yaml"
    shell:
        "rm -f {output}.part && {params.env} {params.launcher} {params.args}"
        " --results-file \"$(realpath -m {output:q}).part\" > {log} 2>&1 && mv {output}.part {output} && rm -f {output}.part.lock"


rule ec_profile:
    # One profiled run: one Kineto trace per rank in the output folder (or a skip note),
    # made beside it and swapped in whole: a failed run leaves the previous folder as it was.
    output:
        update(directory(L.ec_traces(EC_RUN))),
    params:
        args=lambda wildcards: EC.launcher_args(wildcards.ec_run),
        env=EC.env(),
        launcher=EC_LAUNCHER,
    log:
        L.log("embedding_collection/profile", EC_RUN),
    conda:
        "../envs/benchmark.yaml"
    shell:
        "rm -rf {output:q}.part && {params.env} {params.launcher} {params.args}"
        " --profile torch --trace-dir \"$(realpath -m {output:q}).part\" > {log} 2>&1"
        " && rm -rf {output:q} && mv {output:q}.part {output:q}"


rule ec_breakdown:
    # Every rank's trace of a run into one per-op CSV (ranks merge by label); a
    # run whose baseline cannot run here has only its skip note, which is kept.
    input:
        traces=L.ec_traces(EC_RUN),
    output:
        update(directory(L.ec_opcalls(EC_RUN))),
    log:
        L.log("embedding_collection/breakdown", EC_RUN),
    conda:
        "../envs/analysis.yaml"
    shell:
        "rm -rf {output:q}.part && if ls {input.traces}/*.kineto.json.gz > /dev/null 2>&1; then"
        " embprof breakdown --merge {input.traces}/*.kineto.json.gz --out-dir {output:q}.part > {log} 2>&1;"
        " else mkdir -p {output:q}.part && cp {input.traces}/*.skipped.txt {output:q}.part/ 2> {log}; fi"
        " && rm -rf {output:q} && mv {output:q}.part {output:q}"


rule ec_results:
    # Every run's record in one list.
    input:
        [L.ec_timing(run) for run in EC.runs],
    output:
        update(L.ec_results),
    log:
        L.log("embedding_collection/results"),
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof ec-results {input} --out {output} > {log} 2>&1"
