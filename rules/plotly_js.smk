rule plotly_js:
    # The one plotly.js the figure steps' pages load (each would otherwise hold its own
    # copy of several MB); the report keeps its own, so that it opens anywhere alone.
    localrule: True
    input:
        settings=get_settings("plotly_js"),
    output:
        update(RESULTS.plotly_js),
    params:
        plotly=RUN.plotly,
        code=RUN.code_param("plotly_js"),
    log:
        RESULTS.log("plotly_js"),
    benchmark:
        RESULTS.benchmark("plotly_js")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof plotly-js --out {output} --record-settings {input.settings:q} > {log} 2>&1"
