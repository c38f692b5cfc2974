rule profile:
    # One profiler process per config. A crashed benchmark leaves an empty
    # trace and a failed step record; the status checkpoint then keeps the
    # per-op steps of that config out of the report's inputs.
    input:
        table=ancient(RESULTS.configs),
        settings=get_settings("profile"),
    output:
        trace=update(get_trace()),
        record=update(RESULTS.step("profile", LABEL)),
    params:
        test_id=get_test_id,
        preset=RUN.preset,
        profiler=RUN.profiler,
        nsys=RUN.nsys_option,
        options=get_options("profile"),
        suite=RUN.suite_option,
        code=RUN.code_param("profile"),
    log:
        RESULTS.log("profile", LABEL),
    benchmark:
        RESULTS.benchmark("profile", LABEL)
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof profile --test-id {params.test_id:q} --label {wildcards.label}"
        " --preset {params.preset} --profiler {params.profiler} {params.nsys} {params.options}"
        " --trace {output.trace} --record {output.record} --log {log} {params.suite} --record-settings {input.settings:q} > {log} 2>&1"
