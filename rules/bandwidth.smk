rule peak_bandwidth:
    # The device's peak memory bandwidth, measured by a large copy where the
    # records' device is present, else its datasheet value (labelled so).
    # Measured once per results folder (delete the file to measure again):
    # new records of the same device must not re-run every config's bandwidth.
    # The timing files, not benchmark_results.json: downstream of the aggregate, this job
    # would hide every config's bandwidth from Snakemake's needrun pass after the status
    # checkpoints (it masks what lies below a job that must run, ancient edges too).
    input:
        records=get_ancient_timing_files,
        settings=get_settings("peak_bandwidth"),
    output:
        update(L.peak),
    params:
        code=DIGEST["peak_bandwidth"],
    log:
        L.log("peak_bandwidth"),
    benchmark:
        L.benchmark("peak_bandwidth")
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof peak-bandwidth --records {input.records} --force"
        " --out {output} --record-settings {input.settings:q} > {log} 2>&1"


rule bandwidth:
    # Achieved GB/s and % of peak per op (formulas in the bandwidth table: config/bandwidth.yaml
    # where the working directory has one, else the packaged default).
    input:
        opcalls=L.opcalls(LABEL),
        record=L.timing(LABEL),
        peak=L.peak,
        settings=get_settings("bandwidth"),
    output:
        update(L.bandwidth(LABEL)),
    params:
        code=DIGEST["bandwidth"],
    log:
        L.log("bandwidth", LABEL),
    benchmark:
        L.benchmark("bandwidth", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof bandwidth {input.opcalls} --record {input.record}"
        " --peak {input.peak} --out {output} --record-settings {input.settings:q} > {log} 2>&1"


rule bandwidth_plot:
    # The chart of % of peak per config and op: drawn when the bandwidth CSVs change,
    # not on every report run (the report copies its PNG).
    localrule: True
    input:
        bandwidth=get_bandwidth_files,
        # Which configs it shows follows the status checkpoint: an input of its own, so that
        # Snakemake asks get_bandwidth_files again once the checkpoint has run (ancient: a
        # status that changes which configs are shown changes the set of inputs anyway).
        status=ancient(L.status_dir),
        configs=ancient(L.configs),
        peak=L.peak,
        plotly_js=L.plotly_js,
        settings=get_settings("bandwidth_plot"),
    output:
        png=update(L.bandwidth_png),
        html=update(L.bandwidth_html),
    params:
        results_dir=L.root,
        code=DIGEST["bandwidth_plot"],
    log:
        L.log("bandwidth_plot"),
    benchmark:
        L.benchmark("bandwidth_plot")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof bandwidth-plot --results-dir {params.results_dir} --png {output.png}"
        " --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
