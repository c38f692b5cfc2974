rule sunburst:
    input:
        opcalls=L.opcalls(LABEL),
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
        " --png {output.png} --html {output.html} > {log} 2>&1"
