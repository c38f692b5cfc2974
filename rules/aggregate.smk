rule aggregate:
    localrule: True
    input:
        timing=get_timing_files,
        settings=get_settings("aggregate"),
    output:
        update(RESULTS.benchmark_results),
    params:
        code=RUN.code_param("aggregate"),
    log:
        RESULTS.log("aggregate"),
    benchmark:
        RESULTS.benchmark("aggregate")
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof aggregate --out {output} {input.timing} --record-settings {input.settings:q} > {log} 2>&1"
