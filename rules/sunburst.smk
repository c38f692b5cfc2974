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
        code=DIGEST["sunburst"],
    log:
        L.log("sunburst", LABEL),
    benchmark:
        L.benchmark("sunburst", LABEL)
    conda:
        "../envs/report.yaml"
    shell:
        "embprof sunburst --opcalls {input.opcalls}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"


rule plotly_js:
    # The one plotly.js the figure steps' pages load (each would otherwise hold its own
    # copy of several MB); the report keeps its own, so that it opens anywhere alone.
    localrule: True
    input:
        settings=get_settings("plotly_js"),
    output:
        update(L.plotly_js),
    params:
        plotly=PLOTLY_VERSION,
        code=DIGEST["plotly_js"],
    log:
        L.log("plotly_js"),
    benchmark:
        L.benchmark("plotly_js")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof plotly-js --out {output} --record-settings {input.settings:q} > {log} 2>&1"
