rule sunburst:
    input:
        opcalls=L.opcalls(LABEL),
        plotly_js=L.plotly_js,
        settings=get_settings("sunburst"),
    output:
        png=update(report(
            L.sunburst_png(LABEL),
            caption="../report/sunburst.rst",
            category="Per-config breakdowns",
            labels={"config": "{label}", "figure": "sunburst"},
        )),
        html=update(L.sunburst_html(LABEL)),
    params:
        code=RUN.code_param("sunburst"),
    log:
        L.log("sunburst", LABEL),
    benchmark:
        L.benchmark("sunburst", LABEL)
    conda:
        "../envs/report.yaml"
    shell:
        "embprof sunburst --opcalls {input.opcalls}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
