rule timing:
    # The normal timed run, apart from profiling so that no profiler overhead
    # enters a latency; it takes every core, so nothing runs beside it.
    input:
        table=ancient(L.configs),
        settings=get_settings("timing"),
    output:
        timing=update(L.timing(LABEL)),
        record=update(L.step("timing", LABEL)),
    params:
        test_id=get_test_id,
        preset=config["preset"],
        options=get_timing_options,
        suite=SUITE_ARG,
        code=DIGEST["measured"],
    threads: get_all_cores()
    log:
        L.log("timing", LABEL),
    benchmark:
        L.benchmark("timing", LABEL)
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof timing --test-id {params.test_id:q} --label {wildcards.label}"
        " --preset {params.preset} {params.options}"
        " --out {output.timing} --record {output.record} --log {log} {params.suite} --record-settings {input.settings:q} > {log} 2>&1"


rule aggregate:
    localrule: True
    input:
        timing=get_timing_files,
        settings=get_settings("aggregate"),
    output:
        update(L.benchmark_results),
    params:
        code=DIGEST["aggregate"],
    log:
        L.log("aggregate"),
    benchmark:
        L.benchmark("aggregate")
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof aggregate --out {output} {input.timing} --record-settings {input.settings:q} > {log} 2>&1"
