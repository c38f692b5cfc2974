checkpoint status:
    # Every config's status: ok, or the step that failed with its log tail. A
    # checkpoint: what it says decides which per-op outputs the report needs.
    # One job for all configs, so that Snakemake re-evaluates the DAG once after
    # it, not once per config (a dry run stays linear in the number of configs).
    localrule: True
    input:
        configs=ancient(L.configs),
        records=get_step_records,
        settings=get_settings("status"),
    output:
        update(directory(L.status_dir)),
    params:
        results_dir=L.root,
    log:
        L.log("status"),
    benchmark:
        L.benchmark("status")
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof status --results-dir {params.results_dir} --record-settings {input.settings:q} > {log} 2>&1"


rule environment:
    # Device facts come from the timing records (written where the benchmark
    # ran, e.g. a cluster's GPU node); the rest from this host.
    localrule: True
    input:
        timing=get_timing_files,
        settings=get_settings("environment"),
    output:
        update(L.environment),
    params:
        preset=config["preset"],
        profiler=PROFILER,
        nsys=NSYS_ARG,
        suite=SUITE_ARG,
    log:
        L.log("environment"),
    benchmark:
        L.benchmark("environment")
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof environment --preset {params.preset} --profiler {params.profiler}"
        " {params.nsys} {params.suite} --out {output} {input.timing} --record-settings {input.settings:q} > {log} 2>&1"


rule latency_plot:
    localrule: True
    input:
        results=L.benchmark_results,
        plotly_js=L.plotly_js,
        settings=get_settings("latency_plot"),
    output:
        png=update(report(
            L.latency_png,
            caption="../report/latency.rst",
            category="Latency",
            labels={"figure": "latency per iteration"},
        )),
        html=update(L.latency_html),
    params:
        code=DIGEST["latency_plot"],
    log:
        L.log("latency_plot"),
    benchmark:
        L.benchmark("latency_plot")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof latency-plot --results {input.results}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"


rule report:
    # Reads the whole results folder (embprof.results.ResultsLayout); the inputs
    # name what it reads so that Snakemake orders and re-runs it.
    localrule: True
    input:
        unpack(get_per_op_outputs),
        results=L.benchmark_results,
        configs=L.configs,
        latency=L.latency_html,
        bandwidth_plot=L.bandwidth_png,
        status=L.status_dir,
        environment=L.environment,
        peak=L.peak,
        # Written beside the report, not read by it: `snakemake report` leaves the database
        # too. Ancient: runs merged into it (embprof db merge) do not re-draw the report.
        database=ancient(L.database),
        settings=get_settings("report"),
    output:
        html=update(report(
            L.report_html,
            caption="../report/report.rst",
            category="Report",
            labels={"page": "latency report"},
        )),
        summary=update(L.report_summary),
    params:
        results_dir=L.root,
        compare=get_compare_option,
        code=DIGEST["report"],
    log:
        L.log("report"),
    benchmark:
        L.benchmark("report")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof report --results-dir {params.results_dir} {params.compare}"
        " --out-dir {params.results_dir}/report --record-settings {input.settings:q} > {log} 2>&1"
