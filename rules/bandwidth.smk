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
        code=RUN.code_param("bandwidth"),
    log:
        L.log("bandwidth", LABEL),
    benchmark:
        L.benchmark("bandwidth", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof bandwidth {input.opcalls} --record {input.record}"
        " --peak {input.peak} --out {output} --record-settings {input.settings:q} > {log} 2>&1"
