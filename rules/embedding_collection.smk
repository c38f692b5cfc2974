# The multi-GPU EmbeddingCollection benchmark (issue 9) as a config family of its own, read from
# config/embedding_collection.yaml (the working directory's, else this checkout's; checked in
# common.smk); not part of all/report.
#   snakemake --cores 1 embedding_collection
rule embedding_collection:
    input:
        get_ec_outputs(),


rule ec_timing:
    # One timed run: every rank of one torchrun, one record.
    output:
        update(RESULTS.ec_timing(EC_RUN)),
    params:
        launcher=str(WORKFLOW_ROOT / EC_LAUNCHER),
        options=get_ec_options(),
        args=get_ec_args,
    log:
        RESULTS.log("embedding_collection/timing", EC_RUN),
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof ec-run --launcher {params.launcher:q} {params.options} --out {output:q} -- {params.args} > {log} 2>&1"


rule ec_profile:
    # One profiled run: one Kineto trace per rank in the output folder (or a skip note),
    # made beside it and swapped in whole: a failed run leaves the previous folder as it was.
    output:
        update(directory(RESULTS.ec_traces(EC_RUN))),
    params:
        launcher=str(WORKFLOW_ROOT / EC_LAUNCHER),
        options=get_ec_options(),
        args=get_ec_args,
    log:
        RESULTS.log("embedding_collection/profile", EC_RUN),
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof ec-run --launcher {params.launcher:q} {params.options} --profile --out {output:q}"
        " -- {params.args} > {log} 2>&1"


rule ec_breakdown:
    # Every rank's trace of a run into one per-op CSV (ranks merge by label); a
    # run whose baseline cannot run here has only its skip note, which is kept.
    input:
        traces=RESULTS.ec_traces(EC_RUN),
    output:
        update(directory(RESULTS.ec_opcalls(EC_RUN))),
    log:
        RESULTS.log("embedding_collection/breakdown", EC_RUN),
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof ec-breakdown {input.traces:q} --out-dir {output:q} > {log} 2>&1"


rule ec_results:
    # Every run's record in one list.
    input:
        [RESULTS.ec_timing(run) for run in EC.runs],
    output:
        update(RESULTS.ec_results),
    log:
        RESULTS.log("embedding_collection/results"),
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof ec-results {input} --out {output} > {log} 2>&1"
