rule report:
    # Reads the whole results folder (embprof.results.ResultsPaths); the inputs
    # name what it reads so that Snakemake orders and re-runs it.
    localrule: True
    input:
        unpack(get_per_op_outputs),
        results=RESULTS.benchmark_results,
        configs=RESULTS.configs,
        latency=RESULTS.latency_html,
        bandwidth_plot=RESULTS.bandwidth_png,
        status=RESULTS.status_dir,
        environment=RESULTS.environment,
        peak=RESULTS.peak,
        # Written beside the report, not read by it: `snakemake report` leaves the database
        # too. Ancient: runs merged into it (embprof db merge) do not re-draw the report.
        database=ancient(RESULTS.database),
        settings=get_settings("report"),
    output:
        html=update(report(
            RESULTS.report_html,
            caption="../report/report.rst",
            category="Report",
            labels={"page": "latency report"},
        )),
        summary=update(RESULTS.report_summary),
    params:
        results_dir=RESULTS.root,
        compare=RUN.compare_option,
        code=RUN.code_param("report"),
    log:
        RESULTS.log("report"),
    benchmark:
        RESULTS.benchmark("report")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof report --results-dir {params.results_dir} {params.compare}"
        " --out-dir {params.results_dir}/report --record-settings {input.settings:q} > {log} 2>&1"
