checkpoint status:
    # Every config's status: ok, or the step that failed with its log tail. A
    # checkpoint: what it says decides which per-op outputs the report needs.
    # One job for all configs, so that Snakemake re-evaluates the DAG once after
    # it, not once per config (a dry run stays linear in the number of configs).
    localrule: True
    input:
        configs=ancient(RESULTS.configs),
        records=get_step_records,
        settings=get_settings("status"),
    output:
        update(directory(RESULTS.status_dir)),
    params:
        results_dir=RESULTS.root,
    log:
        RESULTS.log("status"),
    benchmark:
        RESULTS.benchmark("status")
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof status --results-dir {params.results_dir} --record-settings {input.settings:q} > {log} 2>&1"
