checkpoint status:
    # One record per config: ok, or the step that failed with its log tail. A
    # checkpoint: what it says decides which per-op outputs the report needs.
    input:
        profile="results/steps/profile/{label}.json",
        timing="results/steps/timing/{label}.json",
    output:
        "results/status/{label}.json",
    params:
        test_id=get_test_id,
    log:
        "results/logs/status/{label}.log",
    benchmark:
        "results/benchmarks/status/{label}.tsv"
    conda:
        "../envs/analysis.yaml"
    shell:
        "python workflow/scripts/status.py --label {wildcards.label} --test-id {params.test_id:q}"
        " {input.profile} {input.timing} --out {output} > {log} 2>&1"


rule environment:
    # Device facts come from the timing records (written where the benchmark
    # ran, e.g. a cluster's GPU node); the rest from this host.
    input:
        timing=get_timing_files,
    output:
        "results/environment.json",
    params:
        preset=config["preset"],
        profiler=PROFILER,
        nsys=NSYS_ARG,
    log:
        "results/logs/environment.log",
    benchmark:
        "results/benchmarks/environment.tsv"
    conda:
        "../envs/benchmark.yaml"
    shell:
        "python workflow/scripts/environment.py --preset {params.preset} --profiler {params.profiler}"
        " {params.nsys} --out {output} {input.timing} > {log} 2>&1"


rule latency_plot:
    input:
        results="results/benchmark_results.json",
        code=get_code_files("latency_plot"),
    output:
        png="results/plots/latency.png",
        html="results/plots/latency.html",
    params:
        code=DIGEST["latency_plot"],
    log:
        "results/logs/latency_plot.log",
    benchmark:
        "results/benchmarks/latency_plot.tsv"
    conda:
        "../envs/report.yaml"
    shell:
        "python workflow/scripts/latency_plot.py --results {input.results}"
        " --png {output.png} --html {output.html} > {log} 2>&1"


rule report:
    input:
        unpack(get_per_op_outputs),
        results="results/benchmark_results.json",
        configs="results/configs.tsv",
        latency="results/plots/latency.html",
        status=get_status_files,
        environment="results/environment.json",
        peak="results/peak_bandwidth.json",
        code=get_code_files("report"),
    output:
        html="results/report/index.html",
        summary="results/report/summary.md",
    params:
        compare=get_compare_option,
        code=DIGEST["report"],
    log:
        "results/logs/report.log",
    benchmark:
        "results/benchmarks/report.tsv"
    conda:
        "../envs/report.yaml"
    shell:
        "python workflow/scripts/report.py --results {input.results} --configs {input.configs}"
        " --opcalls-dir results/opcalls --sunburst-dir results/sunburst"
        " --latency-html {input.latency} --status-dir results/status"
        " --environment {input.environment} --bandwidth-dir results/bandwidth --peak {input.peak}"
        " {params.compare} --out-dir results/report > {log} 2>&1"
