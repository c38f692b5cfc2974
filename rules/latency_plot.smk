rule latency_plot:
    localrule: True
    input:
        results=RESULTS.benchmark_results,
        plotly_js=RESULTS.plotly_js,
        settings=get_settings("latency_plot"),
    output:
        png=update(report(
            RESULTS.latency_png,
            caption="../report/latency.rst",
            category="Latency",
            labels={"figure": "latency per iteration"},
        )),
        html=update(RESULTS.latency_html),
    params:
        code=RUN.code_param("latency_plot"),
    log:
        RESULTS.log("latency_plot"),
    benchmark:
        RESULTS.benchmark("latency_plot")
    conda:
        "../envs/report.yaml"
    shell:
        "embprof latency-plot --results {input.results}"
        " --png {output.png} --html {output.html} --plotly-js {input.plotly_js} --record-settings {input.settings:q} > {log} 2>&1"
