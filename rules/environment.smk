rule environment:
    # Device facts come from the timing records (written where the benchmark
    # ran, e.g. a cluster's GPU node); the rest from this host.
    localrule: True
    input:
        timing=get_timing_files,
        settings=get_settings("environment"),
    output:
        update(RESULTS.environment),
    params:
        preset=RUN.preset,
        profiler=RUN.profiler,
        nsys=RUN.nsys_option,
        suite=RUN.suite_option,
    log:
        RESULTS.log("environment"),
    benchmark:
        RESULTS.benchmark("environment")
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof environment --preset {params.preset} --profiler {params.profiler}"
        " {params.nsys} {params.suite} --out {output} {input.timing} --record-settings {input.settings:q} > {log} 2>&1"
