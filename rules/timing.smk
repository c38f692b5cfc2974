rule timing:
    # The normal timed run, apart from profiling so that no profiler overhead
    # enters a latency; it takes every core, so nothing runs beside it.
    input:
        table=ancient("results/configs.tsv"),
    output:
        timing="results/timing/{label}.json",
        record="results/steps/timing/{label}.json",
    params:
        test_id=get_test_id,
        preset=config["preset"],
        options=get_timing_options,
        code=DIGEST["measured"],
    threads: workflow.cores
    log:
        "results/logs/timing/{label}.log",
    benchmark:
        "results/benchmarks/timing/{label}.tsv"
    conda:
        "../envs/benchmark.yaml"
    shell:
        "python workflow/scripts/timing.py --test-id {params.test_id:q} --label {wildcards.label}"
        " --preset {params.preset} {params.options}"
        " --out {output.timing} --record {output.record} --log {log} > {log} 2>&1"


rule aggregate:
    input:
        timing=get_timing_files,
    output:
        "results/benchmark_results.json",
    params:
        code=DIGEST["aggregate"],
    log:
        "results/logs/aggregate.log",
    benchmark:
        "results/benchmarks/aggregate.tsv"
    conda:
        "../envs/report.yaml"
    shell:
        "python workflow/scripts/aggregate.py --out {output} {input.timing} > {log} 2>&1"
