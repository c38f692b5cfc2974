rule timing:
    # The normal timed run, apart from profiling so that no profiler overhead
    # enters a latency; it takes every core, so nothing runs beside it.
    input:
        table=ancient(RESULTS.configs),
        settings=get_settings("timing"),
    output:
        timing=update(RESULTS.timing(LABEL)),
        record=update(RESULTS.step("timing", LABEL)),
    params:
        test_id=get_test_id,
        preset=RUN.preset,
        options=get_options("timing"),
        suite=RUN.suite_option,
        code=RUN.code_param("timing"),
    threads: get_all_cores()
    log:
        RESULTS.log("timing", LABEL),
    benchmark:
        RESULTS.benchmark("timing", LABEL)
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof timing --test-id {params.test_id:q} --label {wildcards.label}"
        " --preset {params.preset} {params.options}"
        " --out {output.timing} --record {output.record} --log {log} {params.suite} --record-settings {input.settings:q} > {log} 2>&1"
