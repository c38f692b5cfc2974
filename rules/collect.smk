checkpoint collect:
    # Which configs exist is only known by asking pytest, so the DAG below it
    # is built after this has run (never at parse time).
    localrule: True
    input:
        settings=get_settings("collect"),
    output:
        table=update(RESULTS.configs),
    params:
        preset=RUN.preset,
        selection=RUN.collect_options,
        suite=RUN.suite_option,
        code=RUN.code_param("collect"),
    log:
        RESULTS.log("collect"),
    benchmark:
        RESULTS.benchmark("collect")
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof collect --preset {params.preset} {params.selection} {params.suite}"
        " --out {output.table} --record-settings {input.settings:q} > {log} 2>&1"
