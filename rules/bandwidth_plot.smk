rule bandwidth_plot:
    # The chart of % of peak per config and op: drawn when the bandwidth CSVs change,
    # not on every report run (the report copies its PNG).
    localrule: True
    input:
        bandwidth=get_bandwidth_files,
        # Which configs it shows follows the status checkpoint: an input of its own, so that
        # Snakemake asks get_bandwidth_files again once the checkpoint has run (ancient: a
        # status that changes which configs are shown changes the set of inputs anyway).
        status=ancient(RESULTS.status_dir),
        configs=ancient(RESULTS.configs),
        peak=RESULTS.peak,
        plotly_js=RESULTS.plotly_js,
        settings=get_settings("bandwidth_plot"),
    output:
        png=update(RESULTS.bandwidth_png),
        html=update(RESULTS.bandwidth_html),
    params:
        results_dir=RESULTS.root,
        code=RUN.code_param("bandwidth_plot"),
    log:
        RESULTS.log("bandwidth_plot"),
    benchmark:
        RESULTS.benchmark("bandwidth_plot")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof bandwidth-plot --results-dir {params.results_dir} --png {output.png}"
        " --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
