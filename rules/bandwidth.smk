rule bandwidth:
    # Achieved GB/s and % of peak per op (formulas in the bandwidth table: config/bandwidth.yaml
    # where the working directory has one, else the packaged default).
    input:
        opcalls=RESULTS.opcalls(LABEL),
        record=RESULTS.timing(LABEL),
        peak=RESULTS.peak,
        settings=get_settings("bandwidth"),
    output:
        update(RESULTS.bandwidth(LABEL)),
    params:
        code=RUN.code_param("bandwidth"),
    log:
        RESULTS.log("bandwidth", LABEL),
    benchmark:
        RESULTS.benchmark("bandwidth", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof bandwidth {input.opcalls} --record {input.record}"
        " --peak {input.peak} --out {output} --record-settings {input.settings:q} > {log} 2>&1"
