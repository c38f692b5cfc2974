rule breakdown:
    # Every kernel attributed to the op:* range that launched it (DESIGN.md). Kernel
    # categories: config/kernel_categories.yaml where the working directory has one,
    # else the packaged default (the command's own default, so a re-run by hand agrees).
    input:
        trace=get_breakdown_trace,
        settings=get_settings("breakdown"),
    output:
        opcalls=update(L.opcalls(LABEL)),
        busy=update(L.busy(LABEL)),
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
        "embprof breakdown {input.trace} --out-dir {params.out_dir} > {log} 2>&1"
