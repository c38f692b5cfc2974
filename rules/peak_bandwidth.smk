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
        update(RESULTS.peak),
    params:
        code=RUN.code_param("peak_bandwidth"),
    log:
        RESULTS.log("peak_bandwidth"),
    benchmark:
        RESULTS.benchmark("peak_bandwidth")
    conda:
        "../envs/benchmark.yaml"
    shell:
        "embprof peak-bandwidth --records {input.records} --force"
        " --out {output} --record-settings {input.settings:q} > {log} 2>&1"
