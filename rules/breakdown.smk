rule breakdown:
    # Every kernel attributed to the op:* range that launched it (DESIGN.md).
    input:
        trace=get_breakdown_trace,
        categories=ancient(CATEGORIES),
    output:
        opcalls=L.opcalls(LABEL),
        busy=L.busy(LABEL),
    params:
        out_dir=L.opcalls_dir,
        code=DIGEST["breakdown"],
    log:
        L.log("breakdown", LABEL),
    benchmark:
        L.benchmark("breakdown", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof breakdown {input.trace} --out-dir {params.out_dir}"
        " --categories {input.categories} > {log} 2>&1"
