rule database:
    # The run's results as one SQLite file (docs/database.md), from what `measure` leaves.
    # Kept between runs, not remade: a re-run replaces the rows of the configs whose
    # files changed, and the runs merged into it (embprof db merge) stay.
    localrule: True
    input:
        unpack(get_measured_outputs),
        configs=RESULTS.configs,
        settings=get_settings("database"),
    output:
        update(RESULTS.database),
    params:
        results_dir=RESULTS.root,
        code=RUN.code_param("database"),
    log:
        RESULTS.log("database"),
    benchmark:
        RESULTS.benchmark("database")
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof db --record-settings {input.settings:q} write --results-dir {params.results_dir} > {log} 2>&1"
