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
        compare=RUN.compare_option,
        code=RUN.code_param("report"),
    log:
        L.log("report"),
    benchmark:
        L.benchmark("report")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof report --results-dir {params.results_dir} {params.compare}"
        " --out-dir {params.results_dir}/report --record-settings {input.settings:q} > {log} 2>&1"
