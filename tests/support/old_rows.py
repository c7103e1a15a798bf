"""Rows as older servelab wrote them, column text exactly as stored, for the readers of old shapes.

``FIRST_AB_RUN``: an ``ab_runs`` row written by the first ``servelab ab`` (commit e6bef0b, ledger
schema 3): arms carrying ``label`` next to ``value``, comparisons of the Fieller interval only, no
visits, no design. ``AB_RUN_BEFORE_CODEC``, ``AB_SESSION_BEFORE_CODEC`` and
``AB_VISITS_BEFORE_CODEC``: an ``ab_runs`` row and its A/B journal (an interrupted session and
its first visits) written by servelab at commit 0d7d9ad, the last before the one codec: NaN
written as JSON's non-standard ``NaN``, designs without their concurrencies. Each was made by
running that commit's own code (its ``AbResult``, ``Ledger.record_ab`` and ``AbJournal``) on a
hand-made three-round A/B and reading the SQLite file back.

``BENCH_SUMMARY_BEFORE_CONTRACT`` and ``BENCH_JSON_BEFORE_CONTRACT``: a bench run's ``summary``
column and its ``bench --json`` document as servelab at commit 463e769 (the last before bench's
contract moved to ``core/bench``) wrote them for the run that
``tests/core/bench/test_contract.py`` rebuilds (``_run``): the level under its dataclass's field
names in the ledger (``n_ok``, ``throughput``, a flat client), under other keys in
``--json``. Made by running that commit's own ``record_run`` and ``result_json`` and reading the
SQLite file back.
"""

from __future__ import annotations

import dataclasses

from servelab.core.ledger.codec import encode
from servelab.core.load.records import RequestRecord
from servelab.io.ledger.packed import pack_record

__all__ = [
    "AB_RUN_BEFORE_CODEC",
    "AB_SESSION_BEFORE_CODEC",
    "AB_VISITS_BEFORE_CODEC",
    "BENCH_JSON_BEFORE_CONTRACT",
    "BENCH_SUMMARY_BEFORE_CONTRACT",
    "BISECT_BEFORE_TYPED_BENCH",
    "EXPERIMENT_WORKLOADS_BEFORE_TYPED",
    "FIRST_AB_RUN",
    "packed_v1",
]

FIRST_AB_RUN = {
    "service": "decode",
    "knob": "SGLANG_SM120_MMA_TARGET_CTAS",
    "config": (
        '{"baseline":"256","bench":{"concurrencies":[64,80,96],"deadline_s":null,"endpo'
        'int":"/v1/chat/completions","idle_timeout_s":60.0,"ignore_eos":true,"input_len'
        '":{"kind":"fixed","minimum":1,"spread":0,"value":128},"label":"","model":"defa'
        'ult","output_len":{"kind":"fixed","minimum":1,"spread":0,"value":64},"rate":nu'
        'll,"repeat":1,"requests":100,"seed":0,"shared_prefix_len":0,"slo":null,"url":"'
        '","warmup":0},"candidate":"512","keep":false,"knob":"SGLANG_SM120_MMA_TARGET_C'
        'TAS","repeat":2,"service":"decode"}'
    ),
    "result": (
        '{"ab_id":null,"anomalies":[{"arm":"256","concurrency":96,"drop":0.032509090909'
        '09104,"kind":"non_monotonic","previous":80,"previous_throughput":1097.80876494'
        '02391,"throughput":1062.12},{"arm":"512","concurrency":80,"drop":0.01024113475'
        '1772796,"kind":"non_monotonic","previous":64,"previous_throughput":1125.752988'
        '0478087,"throughput":1114.2240000000002}],"arms":[{"label":"256","throughput":'
        '{"64":[1000.0,1004.0],"80":[1100.0,1095.617529880478],"96":[1060.0,1064.24]},"'
        'value":"256","verifications":[1,3]},{"label":"512","throughput":{"64":[1128.0,'
        '1123.5059760956176],"80":[1112.0,1116.448],"96":[1120.0,1115.5378486055777]},"'
        'value":"512","verifications":[2,4]}],"baseline":"256","candidate":"512","compa'
        'risons":[{"baseline":"256","candidate":"512","ci":[1.1097674854695412,1.137414'
        '5439019627],"concurrency":64,"confidence":0.95,"method":"Fieller interval of a'
        ' ratio of independent means (Welch df=2.0)","n_baseline":2,"n_candidate":2,"ra'
        'tio":1.1235059760956174,"reason":"","verdict":"better"},{"baseline":"256","can'
        'didate":"512","ci":[1.0026972822690614,1.0273579641775916],"concurrency":80,"c'
        'onfidence":0.95,"method":"Fieller interval of a ratio of independent means (We'
        'lch df=2.0)","n_baseline":2,"n_candidate":2,"ratio":1.0149527272727272,"reason'
        '":"","verdict":"better"},{"baseline":"256","candidate":"512","ci":[1.039657758'
        '0010091,1.0652866647030137],"concurrency":96,"confidence":0.95,"method":"Fiell'
        'er interval of a ratio of independent means (Welch df=2.0)","n_baseline":2,"n_'
        'candidate":2,"ratio":1.052394196797715,"reason":"","verdict":"better"}],"knob"'
        ':"SGLANG_SM120_MMA_TARGET_CTAS","original":"512","restored":true,"service":"de'
        'code"}'
    ),
}

AB_RUN_BEFORE_CODEC = {
    "service": "decode",
    "knob": "SGLANG_SM120_MMA_TARGET_CTAS",
    "config": (
        '{"baseline":"256","bench":{"concurrencies":[80,96],"deadline_s":null,"endpoint'
        '":"/v1/chat/completions","idle_timeout_s":60.0,"ignore_eos":true,"input_len":{'
        '"kind":"fixed","minimum":1,"spread":0,"value":8},"label":"","model":"default",'
        '"output_len":{"kind":"fixed","minimum":1,"spread":0,"value":64},"ramp_s":null,'
        '"rate":null,"repeat":1,"requests":100,"seed":0,"shared_prefix_len":0,"slo":nul'
        'l,"url":"","warmup":0,"workers":1},"boundary":"pocock","candidate":"512","gpus'
        '":8,"keep":false,"knob":"SGLANG_SM120_MMA_TARGET_CTAS","margin":0.03,"max_roun'
        'ds":6,"order":"abba","order_seed":0,"repeat":3,"service":"decode","until_decid'
        'ed":true}'
    ),
    "result": (
        '{"ab_id":null,"anomalies":[{"alpha":0.05,"arm":"256","concurrency":96,"drop":0'
        '.028556319407720854,"drop_ci":[0.02423828184490522,0.032874356970536374],"kind'
        '":"non_monotonic","n":3,"n_previous":3,"p_value":7.377281897954515e-05,"previo'
        'us":80,"previous_throughput":1891.6303333333333,"significant":true,"test":"Wel'
        'ch\'s t-test (one-sided), Welch-Satterthwaite df","throughput":1837.61233333333'
        '33}],"arms":[{"throughput":{"80":[1891.0,1896.6729999999998,1887.218],"96":[18'
        '37.0,1842.5109999999997,1833.326]},"value":"256","verifications":[10,11,12]},{'
        '"throughput":{"80":[1912.0,1929.2079999999999,1898.616],"96":[1990.0,2007.9099'
        '999999999,1976.07]},"value":"512","verifications":[10,11,12]}],"baseline":"256'
        '","candidate":"512","comparisons":[{"baseline":"256","candidate":"512","ci":[0'
        '.9976974399186962,1.0253366643696762],"concurrency":80,"confidence":0.95,"deci'
        'sion":"undecided","method":"paired t interval on the mean log ratio (n=3 round'
        's, df=2)","n_baseline":3,"n_candidate":3,"paired":{"bootstrap_ci":[1.006039577'
        '8336153,1.0171537212793138],"bootstrap_method":"percentile bootstrap (2000 res'
        'amples, seed 0) of the mean log ratio; shown, not used for the verdict","ci":['
        '0.9976974399186962,1.0253366643696762],"confidence":0.95,"log_ratios":[0.01104'
        '4024952889133,0.017008257344562502,0.0060214126865976185],"method":"paired t i'
        'nterval on the mean log ratio (n=3 rounds, df=2)","n":3,"ratio":1.011422644148'
        '5288,"reason":"","sd_log":0.005500143294158182,"verdict":"not significant"},"r'
        'atio":1.0114226441485288,"reason":"","sequential":{"alpha":0.05000000000000004'
        '4,"estimate":0.011357898328016418,"high":0.03424075266512121,"looks":6,"low":-'
        '0.011524956009088368,"method":"Pocock repeated confidence intervals on Student'
        '\'s t (Jennison & Turnbull 1989)","mixture":NaN,"n":3,"ratio_ci":[0.98854120189'
        '68588,1.0348337157151042]},"unpaired":{"confidence":0.95,"high":1.029647862468'
        '2657,"low":0.9932950385724595,"method":"Fieller interval of a ratio of indepen'
        'dent means (Welch df=2.4)","ratio":1.0114421580960762,"reason":"","verdict":"n'
        'ot significant"},"verdict":"no significant difference"},{"baseline":"256","can'
        'didate":"512","ci":[1.0689229925040504,1.0985353793144648],"concurrency":96,"c'
        'onfidence":0.95,"decision":"better","method":"paired t interval on the mean lo'
        'g ratio (n=3 rounds, df=2)","n_baseline":3,"n_candidate":3,"paired":{"bootstra'
        'p_ci":[1.0778606750790638,1.0897682564717388],"bootstrap_method":"percentile b'
        "ootstrap (2000 resamples, seed 0) of the mean log ratio; shown, not used for t"
        'he verdict","ci":[1.0689229925040504,1.0985353793144648],"confidence":0.95,"lo'
        'g_ratios":[0.08000083250341243,0.08596506489508582,0.0749782202371209],"method'
        '":"paired t interval on the mean log ratio (n=3 rounds, df=2)","n":3,"ratio":1'
        '.0836280381331915,"reason":"","sd_log":0.005500143294158198,"verdict":"A>B"},"'
        'ratio":1.0836280381331915,"reason":"","sequential":{"alpha":0.0500000000000000'
        '44,"estimate":0.08031470587853973,"high":0.10319756021564458,"looks":6,"low":0'
        '.057431851541434875,"method":"Pocock repeated confidence intervals on Student\''
        's t (Jennison & Turnbull 1989)","mixture":NaN,"n":3,"ratio_ci":[1.059113091270'
        '687,1.1087104245114805]},"unpaired":{"confidence":0.95,"high":1.10346684623359'
        '84,"low":1.0638958352784689,"method":"Fieller interval of a ratio of independe'
        'nt means (Welch df=2.3)","ratio":1.0836489451801314,"reason":"","verdict":"A>B'
        '"},"verdict":"better"}],"design":{"boundary":"pocock","cost":{"estimated":fals'
        'e,"gpu_minutes":56.0,"minutes":7.0,"rounds":3,"visits":6},"decided":{"80":{"de'
        'cision":"undecided","rounds":null},"96":{"decision":"better","rounds":3}},"dro'
        'ps":[{"alpha":0.05,"arm":"256","concurrency":96,"drop":0.028556319407720854,"d'
        'rop_ci":[0.02423828184490522,0.032874356970536374],"kind":"non_monotonic","n":'
        '3,"n_previous":3,"p_value":7.377281897954515e-05,"previous":80,"previous_throu'
        'ghput":1891.6303333333333,"significant":true,"test":"Welch\'s t-test (one-sided'
        '), Welch-Satterthwaite df","throughput":1837.6123333333333}],"fixed_cost":{"es'
        'timated":true,"gpu_minutes":112.0,"minutes":14.0,"rounds":6,"visits":12},"gpus'
        '":8,"margin":0.03,"max_rounds":6,"order":"abba","order_seed":0,"resumed":false'
        ',"rounds_run":3,"session_id":1,"stopped":"fixed design","until_decided":true},'
        '"knob":"SGLANG_SM120_MMA_TARGET_CTAS","original":"512","restored":true,"servic'
        'e":"decode","visits":[{"arm":"256","bench_run_ids":[0],"bench_s":{"80":20.0,"9'
        '6":20.0},"failed_requests":0,"live_value":"256","order":"256\\u2192512","overhe'
        'ad_s":30.0,"position":0,"round":0,"server_throughput":{"80":1880.0},"throughpu'
        't":{"80":1891.0,"96":1837.0},"verification_id":10},{"arm":"512","bench_run_ids'
        '":[1],"bench_s":{"80":20.0,"96":20.0},"failed_requests":0,"live_value":"512","'
        'order":"256\\u2192512","overhead_s":30.0,"position":1,"round":0,"server_through'
        'put":{"80":1905.0},"throughput":{"80":1912.0,"96":1990.0},"verification_id":10'
        '},{"arm":"512","bench_run_ids":[3],"bench_s":{"80":20.0,"96":20.0},"failed_req'
        'uests":0,"live_value":"512","order":"512\\u2192256","overhead_s":30.0,"position'
        '":2,"round":1,"server_throughput":{"80":1910.7149999999997},"throughput":{"80"'
        ':1929.2079999999999,"96":2007.9099999999999},"verification_id":11},{"arm":"256'
        '","bench_run_ids":[4],"bench_s":{"80":20.0,"96":20.0},"failed_requests":0,"liv'
        'e_value":"256","order":"512\\u2192256","overhead_s":30.0,"position":3,"round":1'
        ',"server_throughput":{"80":1885.6399999999999},"throughput":{"80":1896.6729999'
        '999998,"96":1842.5109999999997},"verification_id":11},{"arm":"256","bench_run_'
        'ids":[6],"bench_s":{"80":20.0,"96":20.0},"failed_requests":0,"live_value":"256'
        '","order":"256\\u2192512","overhead_s":30.0,"position":4,"round":2,"server_thro'
        'ughput":{"80":1876.24},"throughput":{"80":1887.218,"96":1833.326},"verificatio'
        'n_id":12},{"arm":"512","bench_run_ids":[7],"bench_s":{"80":20.0,"96":20.0},"fa'
        'iled_requests":0,"live_value":"512","order":"256\\u2192512","overhead_s":30.0,"'
        'position":5,"round":2,"server_throughput":{"80":1901.19},"throughput":{"80":18'
        '98.616,"96":1976.07},"verification_id":12}]}'
    ),
}

AB_SESSION_BEFORE_CODEC = {
    "service": "decode",
    "knob": "SGLANG_SM120_MMA_TARGET_CTAS",
    "config": (
        '{"service": "decode", "knob": "SGLANG_SM120_MMA_TARGET_CTAS", "baseline": "256'
        '", "candidate": "512", "repeat": 3, "keep": false, "order": "abba", "order_see'
        'd": 0, "until_decided": true, "max_rounds": 6, "margin": 0.03, "gpus": 8, "bou'
        'ndary": "pocock", "bench": {"url": "", "concurrencies": [80, 96], "requests": '
        '100, "input_len": {"kind": "fixed", "value": 8, "spread": 0, "minimum": 1}, "o'
        'utput_len": {"kind": "fixed", "value": 64, "spread": 0, "minimum": 1}, "repeat'
        '": 1, "rate": null, "warmup": 0, "idle_timeout_s": 60.0, "deadline_s": null, "'
        'seed": 0, "model": "default", "label": "", "endpoint": "/v1/chat/completions",'
        ' "slo": null, "shared_prefix_len": 0, "ignore_eos": true, "ramp_s": null, "wor'
        'kers": 1}}'
    ),
    "original": "512",
    "status": "interrupted",
}

AB_VISITS_BEFORE_CODEC = (
    {
        "position": 0,
        "visit": (
            '{"arm": "256", "round": 0, "position": 0, "order": "256\\u2192512", "verificati'
            'on_id": 10, "live_value": "256", "throughput": {"80": 1891.0, "96": 1837.0}, "'
            'failed_requests": 0, "bench_run_ids": [0], "overhead_s": 30.0, "bench_s": {"80'
            '": 20.0, "96": 20.0}, "server_throughput": {"80": 1880.0}}'
        ),
    },
    {
        "position": 1,
        "visit": (
            '{"arm": "512", "round": 0, "position": 1, "order": "256\\u2192512", "verificati'
            'on_id": 10, "live_value": "512", "throughput": {"80": 1912.0, "96": 1990.0}, "'
            'failed_requests": 0, "bench_run_ids": [1], "overhead_s": 30.0, "bench_s": {"80'
            '": 20.0, "96": 20.0}, "server_throughput": {"80": 1905.0}}'
        ),
    },
    {
        "position": 2,
        "visit": (
            '{"arm": "512", "round": 1, "position": 2, "order": "512\\u2192256", "verificati'
            'on_id": 11, "live_value": "512", "throughput": {"80": 1929.2079999999999, "96"'
            ': 2007.9099999999999}, "failed_requests": 0, "bench_run_ids": [3], "overhead_s'
            '": 30.0, "bench_s": {"80": 20.0, "96": 20.0}, "server_throughput": {"80": 1910'
            ".7149999999997}}"
        ),
    },
)

BENCH_SUMMARY_BEFORE_CONTRACT = (
    '{"cache":{"cached_tokens":0,"hit_rate":null,"prompt_tokens":0,"reported":0,"requests":0},"cl'
    'ient":{"client_bound":true,"cpu_ms_per_token":0.0123,"cpu_s":0.01,"dispatch_p99_ms":0.2,"loo'
    'p_lag_max_ms":2.5,"loop_lag_p99_ms":1.5,"reasons":["loop-lag"],"wall_s":0.1},"concurrency":2'
    ',"deadline_hit":false,"failures":{"http 500":1},"interrupted":false,"level":{"cache":{"cache'
    'd_tokens":0,"prompt_tokens":0,"reported":0,"requests":4},"client_bound":true,"client_reasons'
    '":["loop-lag"],"concurrency":2,"connect_ms":{"max":0.4,"mean":0.35,"median":0.35,"min":0.3,"'
    'n":2,"p90":0.39,"p99":0.399,"std":0.07071067811865477},"cpu_ms_per_token":0.0123,"dispatch_m'
    's":{"max":0.001,"mean":0.001,"median":0.001,"min":0.001,"n":5,"p90":0.001,"p99":0.001,"std":'
    '0.0},"e2e_ms":{"max":20.001,"mean":20.001,"median":20.001,"min":20.001,"n":4,"p90":20.001,"p'
    '99":20.001,"std":0.0},"failures":{"http 500":1},"gap_ms":{"max":5.0,"mean":5.0,"median":5.0,'
    '"min":5.0,"n":12,"p90":5.0,"p99":5.0,"std":0.0},"goodput":null,"itl_ms":{"max":5.0,"mean":5.'
    '0,"median":5.0,"min":5.0,"n":4,"p90":5.0,"p99":5.0,"std":0.0},"loop_lag_max_ms":2.5,"loop_la'
    'g_p99_ms":1.5,"n_ok":4,"n_requests":5,"n_runs":1,"output_tokens_usage":true,"request_through'
    'put":{"max":173.90548237033173,"mean":173.90548237033173,"median":173.90548237033173,"min":1'
    '73.90548237033173,"n":1,"p90":173.90548237033173,"p99":173.90548237033173,"std":NaN},"slo":n'
    'ull,"steady_throughput":{"max":0.0,"mean":0.0,"median":0.0,"min":0.0,"n":1,"p90":0.0,"p99":0'
    '.0,"std":NaN},"throughput":{"max":695.6219294813269,"mean":695.6219294813269,"median":695.62'
    '19294813269,"min":695.6219294813269,"n":1,"p90":695.6219294813269,"p99":695.6219294813269,"s'
    'td":NaN},"throughput_ci":{"confidence":0.95,"estimate":695.6219294813269,"high":NaN,"low":Na'
    'N,"method":"Student-t interval of the mean","n":1},"tpot_ms":{"max":5.0,"mean":5.0,"median":'
    '5.0,"min":5.0,"n":4,"p90":5.0,"p99":5.0,"std":0.0},"traces":null,"ttft_ms":{"max":5.001,"mea'
    'n":5.001,"median":5.001,"min":5.001,"n":4,"p90":5.001,"p99":5.001,"std":0.0},"workers":1},"m'
    'etrics":{"duration_s":0.023001,"goodput":null,"n_failed":1,"n_ok":4,"n_requests":5,"output_t'
    'hroughput":695.6219294813269,"output_tokens":16,"request_throughput":173.90548237033173,"ste'
    'ady_throughput":0.0,"steady_window_s":0.004},"repeat_index":0}'
)

BENCH_JSON_BEFORE_CONTRACT = (
    '{"config": {"concurrencies": [2], "deadline_s": null, "endpoint": "/v1/chat/completions", "h'
    'eaders": [], "idle_timeout_s": 60.0, "ignore_eos": true, "input_len": {"kind": "fixed", "min'
    'imum": 1, "spread": 0, "value": 128}, "label": "old", "model": "default", "output_len": {"ki'
    'nd": "fixed", "minimum": 1, "spread": 0, "value": 64}, "ramp_s": null, "rate": null, "repeat'
    '": 1, "requests": 5, "seed": 0, "shared_prefix_len": 0, "slo": null, "trace": null, "url": "'
    'http://x", "warmup": 0, "workers": 1}, "failed": 1, "interrupted": false, "levels": [{"cache'
    '": {"cached_tokens": 0, "hit_rate": null, "prompt_tokens": 0, "reported": 0, "requests": 4},'
    ' "client": {"client_bound": true, "cpu_ms_per_token": 0.0123, "loop_lag_max_ms": 2.5, "loop_'
    'lag_p99_ms": 1.5, "reasons": ["loop-lag"], "workers": 1}, "concurrency": 2, "connect_ms": {"'
    'max": 0.4, "mean": 0.35, "median": 0.35, "min": 0.3, "n": 2, "p90": 0.39, "p99": 0.399, "std'
    '": 0.07071067811865477}, "dispatch_ms": {"max": 0.001, "mean": 0.001, "median": 0.001, "min"'
    ': 0.001, "n": 5, "p90": 0.001, "p99": 0.001, "std": 0.0}, "e2e_ms": {"max": 20.001, "mean": '
    '20.001, "median": 20.001, "min": 20.001, "n": 4, "p90": 20.001, "p99": 20.001, "std": 0.0}, '
    '"failed": 1, "failures": {"http 500": 1}, "gap_ms": {"max": 5.0, "mean": 5.0, "median": 5.0,'
    ' "min": 5.0, "n": 12, "p90": 5.0, "p99": 5.0, "std": 0.0}, "goodput": null, "itl_ms": {"max"'
    ': 5.0, "mean": 5.0, "median": 5.0, "min": 5.0, "n": 4, "p90": 5.0, "p99": 5.0, "std": 0.0}, '
    '"ok": 4, "output_throughput": {"max": 695.6219294813269, "mean": 695.6219294813269, "median"'
    ': 695.6219294813269, "min": 695.6219294813269, "n": 1, "p90": 695.6219294813269, "p99": 695.'
    '6219294813269, "std": null}, "output_throughput_ci": {"confidence": 0.95, "high": null, "low'
    '": null, "method": "Student-t interval of the mean", "verdict": "inconclusive"}, "output_tok'
    'ens_from_usage": true, "request_throughput": {"max": 173.90548237033173, "mean": 173.9054823'
    '7033173, "median": 173.90548237033173, "min": 173.90548237033173, "n": 1, "p90": 173.9054823'
    '7033173, "p99": 173.90548237033173, "std": null}, "requests": 5, "runs": 1, "slo": null, "st'
    'eady_output_throughput": {"max": 0.0, "mean": 0.0, "median": 0.0, "min": 0.0, "n": 1, "p90":'
    ' 0.0, "p99": 0.0, "std": null}, "tpot_ms": {"max": 5.0, "mean": 5.0, "median": 5.0, "min": 5'
    '.0, "n": 4, "p90": 5.0, "p99": 5.0, "std": 0.0}, "ttft_ms": {"max": 5.001, "mean": 5.001, "m'
    'edian": 5.001, "min": 5.001, "n": 4, "p90": 5.001, "p99": 5.001, "std": 0.0}, "ttft_phases":'
    ' null}], "percentile_method": "linear interpolation between closest ranks (Hyndman & Fan typ'
    'e 7)"}'
)


#: A bisection's start (the case event ``bisect``'s detail) as stored while its ``bench`` was read
#: as JSON: a threshold test's bench config, written before ``workers``, ``headers``, ``ramp_s``
#: and ``trace`` existed, and a soak test's, which had none (``{}``).
BISECT_BEFORE_TYPED_BENCH = (
    '{"alpha":0.05,"bad":"now","bench":{"concurrencies":[64],"deadline_s":null,"endpoint":"/v1/cha'
    't/completions","idle_timeout_s":60.0,"ignore_eos":true,"input_len":{"kind":"fixed","minimum":1'
    ',"spread":0.0,"value":128.0},"label":"","model":"default","output_len":{"kind":"fixed","minimu'
    'm":1,"spread":0.0,"value":64.0},"rate":null,"repeat":1,"requests":64,"seed":0,"shared_prefix_l'
    'en":0,"slo":null,"url":"http://127.0.0.1:8000","warmup":0},"case_id":3,"changes":[{"bad":"1","'
    'good":"0","knob":"K0","service":"decode"},{"bad":"1","good":"0","knob":"K1","service":"decode"'
    '}],"effect":0.5,"good":"2026-03-01T10:00:00Z","rounds":3,"runs":1,"sessions":null,"test":{"bel'
    'ow":true,"concurrency":64,"kind":"threshold","metric":"throughput","value":1500.0},"workload_s'
    'oak_id":null}',
    '{"alpha":0.05,"bad":"now","bench":{},"case_id":3,"changes":[{"bad":"1","good":"0","knob":"K0",'
    '"service":"decode"},{"bad":"1","good":"0","knob":"K1","service":"decode"}],"effect":0.5,"good"'
    ':"2026-03-01T10:00:00Z","rounds":3,"runs":1,"sessions":2,"test":{"below":true,"concurrency":0,'
    '"kind":"soak","metric":"","value":0.0},"workload_soak_id":7}',
)


#: A ``case test``'s ``workload`` (its experiment event's detail) as stored while it was read as
#: JSON: a soak test's soak config (written before ``client``, ``headers``, ``fresh_context``,
#: ``warm_up`` and ``answer_probes`` existed), an answers test's bench flat under its ``test``
#: (before ``workers``, ``headers``, ``ramp_s``, ``trace``), an experiment of no data's, and one
#: that no longer reads as either (a soak config whose ``sessions`` is 0).
EXPERIMENT_WORKLOADS_BEFORE_TYPED = (
    '{"check_determinism":true,"connection":"reuse","duration_s":300.0,"idle_timeout_s":30.0,"kno'
    'bs":{},"localize":true,"max_tokens":24,"model":null,"rounds":4,"seed":7,"sessions":3,"think_t'
    'ime_s":0.0,"turn_words":48}',
    '{"concurrencies":[8],"deadline_s":null,"endpoint":"/v1/chat/completions","idle_timeout_s":60.'
    '0,"ignore_eos":true,"input_len":{"kind":"fixed","minimum":1,"spread":0.0,"value":128.0},"labe'
    'l":"","model":"default","output_len":{"kind":"fixed","minimum":1,"spread":0.0,"value":64.0},"'
    'rate":null,"repeat":1,"requests":40,"seed":0,"shared_prefix_len":0,"slo":null,"test":"answers'
    '@C8","url":"http://127.0.0.1:8000","warmup":0}',
    "{}",
    '{"sessions":0,"rounds":4}',
)


def packed_v1(record: RequestRecord) -> bytes:
    """``record`` in the compact form servelab wrote before version 2 (the ids as two texts),
    by the layout's own words (:mod:`servelab.io.ledger.packed`): version byte 1, the same
    body, then (when any is set) each id as a varint length and UTF-8, and the two numbers + 1."""
    bare = dataclasses.replace(
        record, request_id="", traceparent="", cached_tokens=None, session=None
    )
    body = pack_record(encode(bare))
    assert body is not None and body[0] == 2
    tail = bytearray()
    numbers = (record.cached_tokens, record.session)
    if record.request_id or record.traceparent or any(n is not None for n in numbers):
        for text in (record.request_id, record.traceparent):
            _varint(tail, len(text.encode()))
            tail += text.encode()
        for number in numbers:
            _varint(tail, 0 if number is None else number + 1)
    return b"\x01" + body[1:] + bytes(tail)


def _varint(out: bytearray, value: int) -> None:
    zig = value * 2  # zigzag of a value >= 0
    while zig > 0x7F:
        out.append((zig & 0x7F) | 0x80)
        zig >>= 7
    out.append(zig)
