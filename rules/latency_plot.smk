rule latency_plot:
    localrule: True
    input:
        results=L.benchmark_results,
        plotly_js=L.plotly_js,
        settings=get_settings("latency_plot"),
    output:
        png=update(report(
            L.latency_png,
            caption="../report/latency.rst",
            category="Latency",
            labels={"figure": "latency per iteration"},
        )),
        html=update(L.latency_html),
    params:
        code=RUN.code_param("latency_plot"),
    log:
        L.log("latency_plot"),
    benchmark:
        L.benchmark("latency_plot")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof latency-plot --results {input.results}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
