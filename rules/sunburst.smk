rule sunburst:
    input:
        opcalls=RESULTS.opcalls(LABEL),
        plotly_js=RESULTS.plotly_js,
        settings=get_settings("sunburst"),
    output:
        png=update(report(
            RESULTS.sunburst_png(LABEL),
            caption="../report/sunburst.rst",
            category="Per-config breakdowns",
            labels={"config": "{label}", "figure": "sunburst"},
        )),
        html=update(RESULTS.sunburst_html(LABEL)),
    params:
        code=RUN.code_param("sunburst"),
    log:
        RESULTS.log("sunburst", LABEL),
    benchmark:
        RESULTS.benchmark("sunburst", LABEL)
    conda:
        "../envs/report.yaml"
    shell:
        "embprof sunburst --opcalls {input.opcalls}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
