rule breakdown:
    # Every kernel attributed to the op:* range that launched it (DESIGN.md). Kernel
    # categories: config/kernel_categories.yaml where the working directory has one,
    # else the packaged default (the command's own default, so a re-run by hand agrees).
    input:
        trace=get_breakdown_trace(),
        # After the status checkpoint, whose output only orders it (ancient): which configs get
        # a breakdown follows the status, and a re-run plans from the last run's status until the
        # checkpoint has run again (a profile that fails now leaves an empty trace, never read).
        status=ancient(RESULTS.status_dir),
        settings=get_settings("breakdown"),
    output:
        opcalls=update(RESULTS.opcalls(LABEL)),
        samples=update(RESULTS.samples(LABEL)),
        busy=update(RESULTS.busy(LABEL)),
    params:
        out_dir=RESULTS.opcalls_dir,
        code=RUN.code_param("breakdown"),
    log:
        RESULTS.log("breakdown", LABEL),
    benchmark:
        RESULTS.benchmark("breakdown", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof breakdown {input.trace} --out-dir {params.out_dir} --record-settings {input.settings:q} > {log} 2>&1"
