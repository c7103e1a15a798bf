"""How progress reads: every kind of event an operation tells, as the line the console prints (the
sentences ops used to compose), and a bench level's line."""

from __future__ import annotations

from types import ModuleType
from typing import get_args

import pytest

from servelab.core import progress
from servelab.core.ab import events as ab_events
from servelab.core.ab import tuneevents as tune_events
from servelab.core.ab.events import (
    AbJournalStarted,
    AbResumed,
    AbVisitStarted,
    KnobKept,
    KnobRestoring,
)
from servelab.core.ab.tuneevents import (
    PricedFrom,
    TuneArmKept,
    TuneEliminated,
    TuneLevelStopped,
    TuneOverBudget,
    TuneResumed,
    TuneScreened,
    TuneStarted,
    TuneVisitStarted,
)
from servelab.core.answers.events import (
    AnswersProgress,
    ArmAnswered,
    ArmDropped,
    ReferencesReused,
    ReferencesTaken,
)
from servelab.core.bench.contract import BenchProgress
from servelab.core.case import bisectevents as bisect_events
from servelab.core.case import events as case_events
from servelab.core.case.bisectevents import BisectPlanned, BisectResumed, ProbeDecided, ProbeStarted
from servelab.core.case.events import (
    ArmSoaked,
    CaseTestPlanned,
    KnobPuttingBack,
    StepFailed,
    VisitStarted,
)
from servelab.core.deploy import events as deploy_events
from servelab.core.deploy.events import (
    CoRestarting,
    EnvFileRestored,
    KnobNotAsFile,
    LaunchTimedOut,
    OtherDeploymentsRecord,
    RestartingBehind,
    RestartPlanned,
    RollingPlanned,
    RollPhaseFailed,
    RollPhaseStarted,
    RouterNotAsSpec,
    ServiceAlreadyUp,
    ServiceFailed,
    ServiceReady,
    ServiceStarted,
    ServiceStopped,
    StartCommandOutlived,
    StopFailed,
    UnitReloaded,
    UpLeftServingDown,
    UpUndone,
    WasStopping,
)
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.relaunch import SettingChange
from servelab.core.deploy.rolling import RollPhase
from servelab.core.knobs import events as knob_events
from servelab.core.knobs.events import KnobSetting, KnobVerifiedLive
from servelab.core.progress import ProgressEvent
from servelab.core.soak import events as soak_events
from servelab.core.soak.events import (
    EnginesStarted,
    Localizing,
    RequestResent,
    SoakDeadlineReached,
    SoakStarted,
    StallSeen,
    StreamHeld,
)
from servelab.core.soak.signatures import Phase, Signature
from servelab.core.verify import events as verify_events
from servelab.core.verify.coldstart import Start, StartClass, StartReason
from servelab.core.verify.events import (
    ProbingE2E,
    ProbingHealth,
    ProbingWorkers,
    ReadingEnvFile,
    ReadingLiveEnv,
    VerifyingLayers,
)
from servelab.report.progress import describe_level, describe_progress

K = "SGLANG_SM120_MMA_TARGET_CTAS"

#: (event, the line): every kind, and the edges between them.
LINES: list[tuple[ProgressEvent, str]] = [
    (ServiceStarted("decode", 4242, "local", "/s/logs/decode.log"),
     "decode: started pid 4242 on local (log /s/logs/decode.log)"),
    (StartCommandOutlived("decode", 30.0),
     "decode: start command still running after 30.0s, but the service is ready"),
    (LaunchTimedOut("decode", "gpu1", "http://127.0.0.1:30002/health"),
     "decode: its launch command timed out on gpu1; probing readiness at "
     "http://127.0.0.1:30002/health"),
    (ServiceReady("decode", StepOutcome.OK, 1.234), "decode: ok in 1.2s"),
    (ServiceReady("router", StepOutcome.TIMED_OUT_HEALTHY, 61.0),
     "router: command timed out; service healthy in 61.0s"),
    (ServiceAlreadyUp("decode", 4242, by_servelab=True), "decode: already up (pid 4242)"),
    (WasStopping("router", 4243),
     "router: pid 4243 was stopping (it exited while up waited); starting it"),
    (
        ServiceAlreadyUp("decode", 9, by_servelab=True, recorded_again=True),
        "decode: already up (pid 9, started by servelab; its lost pid record written again)",
    ),
    (ServiceAlreadyUp("decode", 77, by_servelab=False),
     "decode: already up (pid 77, not started by servelab)"),
    (KnobNotAsFile("decode", "SGLANG_X", "1024", "512", ("servelab", "restart", "decode")),
     "warning: decode runs SGLANG_X=1024, its file says 512; apply the file with: servelab "
     "restart decode"),
    (RouterNotAsSpec("router", (SettingChange("policy", "--policy", "cache_aware",
                                              "round_robin"),), ("servelab", "restart", "router")),
     "warning: router was launched with other router settings than the spec's (policy: spec "
     "cache_aware, live round_robin); apply the spec's with: servelab restart router"),
    (KnobNotAsFile("decode", "HF_TOKEN", "hf_secretvalue", None, ("servelab", "restart")),
     "warning: decode runs HF_TOKEN=***, its file says unset; apply the file with: servelab "
     "restart"),
    (ServiceStopped("decode", StepOutcome.STOPPED), "decode: stopped"),
    (OtherDeploymentsRecord("decode", "prod", 12, "/srv/.servelab"),
     "decode: the state folder /srv/.servelab is shared with deployment 'prod': its pid record "
     "(pid 12) is that deployment's, left alone (give each spec its own state_dir)"),
    (ServiceStopped("decode", StepOutcome.NOT_RUNNING), "decode: not running"),
    (StopFailed("decode", "HostError: gone"), "decode: could not stop: HostError: gone"),
    (ServiceFailed("decode", "exited early"), "decode: failed: exited early"),
    (UpUndone(False, ("bad", "good")), "up failed; stopping what this run started: bad, good"),
    (UpUndone(True, ()), "up interrupted; stopping what this run started: nothing"),
    (
        UpLeftServingDown(("router",), ("servelab", "up", "-f", "a b.toml")),
        "router was serving before this run and is now down; bring it back with: servelab up -f "
        "'a b.toml'",
    ),
    (
        UpLeftServingDown(("router", "proxy"), ("servelab", "up")),
        "router, proxy were serving before this run and are now down; bring them back with: "
        "servelab up",
    ),
    (RestartPlanned(("decode", "router")), "restart plan: decode -> router"),
    (RestartingBehind("router", ("decode",)), "router: restarting (decode was started behind it)"),
    (
        RestartingBehind("router", ("prefill", "decode")),
        "router: restarting (prefill, decode were started behind it)",
    ),
    (UnitReloaded("decode", "sglang-decode.service"),
     "decode: systemd unit sglang-decode.service changed on disk; ran systemctl daemon-reload"),
    (EnvFileRestored("decode", "/b/decode.env.bak-1"),
     "decode: env file restored from /b/decode.env.bak-1"),
    (RollingPlanned(("decode-1", "decode-2")), "rolling restart: decode-1 -> decode-2"),
    (RollPhaseStarted("decode-1", RollPhase.DRAIN), "decode-1: drain"),
    (RollPhaseFailed("decode-1", RollPhase.ROUTED), "decode-1: routed failed"),
    (ReadingEnvFile("decode"), "reading the env file of decode"),
    (ReadingLiveEnv("decode"), "reading the live environment of decode"),
    (ProbingHealth("router", "/readiness"), "probing router /readiness"),
    (ProbingE2E("proxy"), "e2e probe through proxy"),
    (ProbingWorkers("router"), "e2e: every worker reached through router"),
    (KnobSetting("decode", K, "512"), f"set decode {K}=512"),
    (KnobSetting("decode", K, None), f"unset decode {K}"),
    (CoRestarting(("decode", "router")),
     "co-restart decode → router (the changed services and their dependents)"),
    (VerifyingLayers(("config", "live", "health", "e2e")), "verify config, live, health, e2e"),
    (KnobVerifiedLive("decode", K, "512", 9), f"decode {K}=512, verified live (verification 9)"),
    (KnobVerifiedLive("decode", K, None, 9), f"decode {K} unset, verified live (verification 9)"),
    (KnobVerifiedLive("decode", K, "2048", 9, pair_failed=("pair decode: pair.mismatch",)),
     f"decode {K}=2048, live but not verified: its pair layer failed (pair decode: pair.mismatch; "
     "verification 9): measured, never kept"),
    (KnobVerifiedLive("decode", K, "16", 9, long_failed=True),
     f"decode {K}=16, verified live (verification 9); its long prompt failed (e2e.long_failed), "
     "its short prompts passed"),
    (StepFailed("restart of decode failed: x"), "failed: restart of decode failed: x"),
    (AbJournalStarted(3), "A/B journal 3: resume with `servelab ab --resume 3` if interrupted"),
    (
        AbJournalStarted(3, ("-f", "pd/servelab.toml")),
        "A/B journal 3: resume with `servelab ab --resume 3 -f pd/servelab.toml` if interrupted",
    ),
    (AbResumed(3, 2), "resuming A/B 3: 2 visit(s) kept"),
    (AbVisitStarted(0, 4, "256", "512", K, "512"), f"round 1/4 (256→512): arm {K}=512"),
    (KnobRestoring("decode", K, "512"), f"restoring decode {K}=512"),
    (KnobRestoring("decode", K, None), f"restoring decode {K} unset"),
    (KnobKept("decode", K, "512", "better"), f"keeping decode {K}=512 (the better arm) (--keep)"),
    (KnobKept("decode", K, "384", "384"), f"keeping decode {K}=384 (--keep)"),
    (CaseTestPlanned(f"knob:decode/{K}", "512", "256", 2, ("suspect", "revert", "revert",
                                                           "suspect"), 4, 3, 11),
     f"case test knob:decode/{K}: 512 against 256, 2 round(s) each (S R R S), 4 session(s) x 3 "
     "rounds per visit (the workload of soak #11)"),
    (VisitStarted(0, 4, "suspect"), "visit 1/4: arm suspect"),
    (ArmSoaked("suspect", "512", 2, 4), "arm suspect (512): 2/4 sessions failed"),
    (KnobPuttingBack("decode", K, "256"), f"putting decode {K} back as found (256)"),
    (KnobPuttingBack("decode", K, None), f"putting decode {K} back as found (unset)"),
    (TuneStarted(3, 5, (64, 96), 12),
     "tune of 5 arms at C64, C96, at most 12 blocks: resume with `tune --resume 3` if interrupted"),
    (TuneStarted(None, 2, (64,), 4), "tune of 2 arms at C64, at most 4 blocks"),
    (TuneResumed(3, 7), "resuming tune 3: 7 visit(s) kept"),
    (TuneVisitStarted(2, 12, 0, 5, "512", (64, 96)), "block 2/12, visit 1/5: arm 512 (C64, C96)"),
    (TuneEliminated(64, "256", 3, "512"),
     "C64: arm 256 dropped after block 3: shown worse than 512"),
    (TuneLevelStopped(96, "within_margin", "768"), "C96: stopped (within_margin), winner 768"),
    (TuneLevelStopped(96, "budget", None), "C96: stopped (budget), no winner"),
    (TuneArmKept("512"), "keeping the best arm, 512"),
    (TuneArmKept(None), "no arm is best at every level: putting the original values back"),
    (TuneArmKept(None, pair_failed="512"),
     "the best arm, 512, failed the pair layer when made live (its engines disagree on the KV "
     "hand-off): putting the original values back"),
    (TuneScreened(3, ("--max-running-requests",), ("--enable-cache-report", "X")),
     "screening stopped after 3 block(s): tuning --max-running-requests (--enable-cache-report, X "
     "held at their low value)"),
    (ReferencesTaken("k", 24, 1), "answers: 24 reference answers taken from the baseline at C1"),
    (ReferencesReused("k", 3, 24),
     "answers: reusing 24 reference answers of the same state (references 3)"),
    (ArmDropped("1", "0", 8, 0, 21),
     "arm 1 dropped: it changes answers (8 of 21 wrong against 0 of 21 for 0)"),
    (ArmAnswered("suspect", "1", 7, 21), "arm suspect (1): 7/21 answers wrong"),
    (ArmAnswered("suspect", "1", None, 21), "arm suspect (1): 21 answers (judged at the end)"),
    # the thirty-first pass: cut probes were counted among those answered
    (ArmAnswered("suspect", "1", 2, 18, 3),
     "arm suspect (1): 2/18 answers wrong, 3 cut by the run's end (not judged)"),
    # an unset arm is the engine default, never "None" (the thirteenth hostile pass)
    (ArmAnswered("revert", None, 0, 21), "arm revert (the engine default): 0/21 answers wrong"),
    (CaseTestPlanned(f"knob:decode/{K}", "64", None, 1, ("suspect", "revert"), 0, 2, None),
     f"case test knob:decode/{K}: 64 against the engine default, 1 round(s) each (S R), 2 bench "
     "run(s) with answer probes per visit"),
    (TuneScreened(4, (), ("A", "B")),
     "screening stopped after 4 block(s): no knob left to tune, the original values are kept"),
    (TuneOverBudget(20, 4.0, PricedFrom.FIRST_VISIT, 20 * 4.0 / 60, 20 * 4.0 / 60 * 12, 0.5),
     "warning: --max-minutes 0.5 is shorter than the first block: 20 visit(s) at 4.0 s each "
     "(this tune's first visit) take about 1.3 min, and the block runs whole (the budget is "
     "checked between blocks); every block would take about 16.0 min"),
    (BisectPlanned(2, 6, "soak", 3),
     "case bisect 2: 6 change(s) between good and bad, test soak, at most 3 round(s) per probe"),
    (BisectResumed(2, 2), "resuming the bisection of case 2: 2 probe(s) kept"),
    (ProbeStarted(1, (f"{K}=256", "--enable-metrics=on")),
     f"probe 1: the good state with {K}=256, --enable-metrics=on against the bad state"),
    (ProbeStarted(1, ()), "probe 1: the good state (no change applied) against the bad state"),
    (ProbeDecided(1, "good", 1, 0, 12, 12, 12, 1.9e-6),
     "probe 1: GOOD after 1 round(s): 0/12 failed with the probe, 12/12 in the bad state, "
     "p = 1.9e-06"),
    (SoakStarted(3, 6, "http://127.0.0.1:31110", "reuse"),
     "soak: 3 sessions x 6 rounds via http://127.0.0.1:31110 (reuse connections)"),
    (EnginesStarted(StartClass(Start.COLD, StartReason.FIRST_SINCE_START, 0, 17.9, 0.4, 44.8)),
     "engines were cold (first-since-start)"),
    (RequestResent(2, 5), "resend: session 2 round 5 sent again"),
    (StallSeen(1, 3, 3, 4096, Phase.BODY),
     "stall: session 1 round 3 after 3 requests on its connection (4096 B payload, phase body)"),
    (Localizing(Signature.STALL_BODY),
     "localizing stall_body: replaying the payload through every hop"),
    (StreamHeld(0, 2), "held stream: session 0 round 2's payload, through the entry"),
    (SoakDeadlineReached(), "deadline reached: the sessions stop here (partial results kept)"),
]  # fmt: skip


EVENT_MODULES = (ab_events, tune_events, bisect_events, case_events, deploy_events, knob_events,
                 soak_events, verify_events, progress)  # fmt: skip


@pytest.mark.parametrize("module", EVENT_MODULES, ids=lambda m: m.__name__)
def test_public_api_is_exported(module: ModuleType) -> None:
    assert all(hasattr(module, name) for name in module.__all__)


def test_every_feature_union_is_part_of_the_one_union() -> None:
    unions = (ab_events.AbProgress, tune_events.TuneProgress, bisect_events.BisectProgress,
              case_events.CaseProgress, deploy_events.DeployProgress, knob_events.KnobProgress,
              soak_events.SoakProgress, verify_events.VerifyProgress,
              AnswersProgress)  # fmt: skip
    parts = [set(get_args(union)) for union in unions]
    assert set().union(*parts) == set(get_args(ProgressEvent))
    assert sum(len(part) for part in parts) == len(get_args(ProgressEvent))  # none in two features


@pytest.mark.parametrize(("event", "line"), LINES, ids=lambda e: type(e).__name__)
def test_each_event_reads_as_its_line(event: ProgressEvent, line: str) -> None:
    assert describe_progress(event) == line


def test_every_kind_of_event_has_a_line() -> None:
    assert {type(event) for event, _line in LINES} == set(get_args(ProgressEvent))


def test_a_bench_level_gets_a_line_once_it_is_measured() -> None:
    assert describe_level(BenchProgress("run", 64, 0, 128, 128)) == "  C64: 128 requests measured"
    assert describe_level(BenchProgress("run", 64, 0, 127, 128)) is None
    assert describe_level(BenchProgress("warmup", 64, 0, 0, 8)) is None
