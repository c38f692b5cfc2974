rule profile:
    # One profiler process per config. A crashed benchmark leaves an empty
    # trace and a failed step record; the status checkpoint then keeps the
    # per-op steps of that config out of the report's inputs.
    input:
        table=ancient("results/configs.tsv"),
    output:
        trace=TRACE,
        record="results/steps/profile/{label}.json",
    params:
        test_id=get_test_id,
        preset=config["preset"],
        profiler=PROFILER,
        nsys=NSYS_ARG,
        options=get_profile_options,
        code=DIGEST["measured"],
    log:
        "results/logs/profile/{label}.log",
    benchmark:
        "results/benchmarks/profile/{label}.tsv"
    conda:
        "../envs/benchmark.yaml"
    shell:
        "python workflow/scripts/profile.py --test-id {params.test_id:q} --label {wildcards.label}"
        " --preset {params.preset} --profiler {params.profiler} {params.nsys} {params.options}"
        " --trace {output.trace} --record {output.record} --log {log} > {log} 2>&1"
