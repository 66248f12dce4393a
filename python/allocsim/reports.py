"""The types of the reports replay(), plan(), plan_sweep(), plan_accumulation(), advise(),
fleet() and diff() return: the JSON of the command's --json as a plain dict, typed for editors and type checkers
(docs/json-report.md in the allocsim repository says what each key holds). The keys a report may
leave out are those of the `total=False` classes."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class DeviceOp(TypedDict):
    action: str  # segment_alloc, segment_free, segment_map or segment_unmap
    address: int
    size: int
    stream: int


class Oom(TypedDict):
    event_index: int
    size: int  # requested
    rounded_size: int
    alloc_size: int  # the segment the request needed
    stream: int
    recorded: bool  # the recorded run failed there too
    largest_free_block: int
    reserved_unallocated: int
    allocated_bytes: int
    reserved_bytes: int
    message: str  # PyTorch's OOM message


class BreakdownRow(TypedDict):
    group: str
    segments: int
    reserved: int
    allocated: int
    cached_free: int
    free_in_split_segments: int
    largest_free: int


class Breakdown(TypedDict):
    by_pool: List[BreakdownRow]
    by_segment_size: List[BreakdownRow]


class _FragmentationAlways(TypedDict):
    gmlake_1_minus_peak_active_over_peak_reserved: float
    reserved_unallocated_at_peak: int
    largest_free_block_at_end: int
    breakdown_at_end: Breakdown


class Fragmentation(_FragmentationAlways, total=False):
    reserved_unallocated_at_oom: int  # at an OOM only, as the three below
    largest_free_block_at_oom: int
    failed_request_alloc_size: int
    breakdown_at_oom: Breakdown


class _DepartureAlways(TypedDict):
    kind: str  # segment_operation, oom or address
    op_index: int
    event_index: Optional[int]
    recorded: str
    replayed: str


class Departure(_DepartureAlways, total=False):
    cause: str  # what the trace does not show, where that is why


class _ReplayReportAlways(TypedDict):
    trace: str
    alloc_conf: str
    capacity_bytes: int
    context_bytes: int
    memory_fraction: Optional[float]
    memory_stats: Dict[str, int]  # torch.cuda.memory_stats()'s keys
    device_ops: List[DeviceOp]
    oom: Optional[Oom]
    ooms: int
    oom_events: List[Dict[str, Any]]
    stopped_at_oom: bool
    events_total: int
    events_replayed: int
    recorded_ooms: int
    recorded_ooms_not_reproduced: int
    frees_of_unknown_blocks: int
    restored: Dict[str, int]
    inferred_empty_cache_calls: int
    addresses: Dict[str, Optional[int]]
    leaks: Dict[str, Any]
    fragmentation: Fragmentation
    sites: Dict[str, Any]
    steps: Dict[str, Any]


class ReplayReport(_ReplayReportAlways, total=False):
    """replay()'s report. A snapshot of several GPUs gives `devices` instead, one ReplayReport each
    (with `device`), and the totals at the top."""
    warnings: List[str]
    departure: Departure
    empty_cache_calls_added: int  # with empty_cache_at
    empty_cache_cost: Dict[str, int]  # extra_device_allocs, extra_device_frees
    device: int
    devices: List["ReplayReport"]
    oom_devices: List[int]


class DeviceCalls(TypedDict):
    """The device calls of a run under `cap_bytes` (the card's cap, or the min limit where
    larger), and their time estimated from a table of measured call times."""
    cap_bytes: int
    cuda_malloc: int
    cuda_free: int
    maps: int
    unmaps: int
    estimated_seconds: float


class Plan(TypedDict):
    alloc_conf: str
    min_limit_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    unconstrained_peak_reserved_bytes: int
    fragmentation: float
    fits: bool
    margin_bytes: int  # negative: short by
    replays: int
    device_calls: DeviceCalls


class EmptyCachePlan(Plan):
    """The first setting's plan with torch.cuda.empty_cache() before every step."""
    empty_cache_calls: int
    extra_device_allocs: int  # cudaMalloc calls beyond the setting's own run
    extra_device_seconds: float  # their estimated time, and the cudaFree calls'


class Cheapest(TypedDict, total=False):
    """The remedy that fits at the least cost: a setting, with or without
    torch.cuda.empty_cache() every step, or gradient accumulation (passes, micro_batch)."""
    alloc_conf: str
    empty_cache_every_step: bool
    passes: int
    micro_batch: int


class _PlanReportAlways(TypedDict):
    card_bytes: int
    context_bytes: int
    plans: List[Plan]
    device_call_times: str  # the GPU the call times were measured on
    cheapest: Optional[Cheapest]  # None: nothing fits


class PlanReport(_PlanReportAlways, total=False):
    """plan()'s report."""
    best_alloc_conf: str
    limit_bytes: int
    smallest_card_bytes: int  # without a limit: the best setting's min limit + the context
    empty_cache_before_events: List[int]  # with empty_cache_at
    empty_cache_every_step: "EmptyCachePlan"  # where the trace shows its steps


class Tried(TypedDict):
    value: int
    min_limit_bytes: int
    peak_reserved_bytes: int
    fits: bool


class _SweepPlanAlways(TypedDict):
    alloc_conf: str
    max_value: int  # the largest value that fits
    tried: List[Tried]


class SweepPlan(_SweepPlanAlways, total=False):
    # where sizes beyond the recordings are guesses: the largest value with them held at the
    # largest recording's sizes (the real largest lies between max_value and this)
    max_value_held: int


class RankTried(TypedDict):
    ranks: int
    min_limit_bytes: int
    peak_reserved_bytes: int
    fits: bool


class RankPlan(TypedDict):
    alloc_conf: str
    min_ranks: int  # the fewest ranks that fit (0: none up to the bound)
    tried: List[RankTried]


class _RankPlanReportAlways(TypedDict):
    card_bytes: int
    context_bytes: int
    bound: int  # the most ranks searched
    plans: List[RankPlan]


class RankPlanReport(_RankPlanReportAlways, total=False):
    """plan_ranks()'s report."""
    limit_bytes: int


class GuessedSizes(TypedDict):
    """The allocations whose size beyond the largest recording is a guess (a kernel whose size
    changed between the recordings), and their bytes at the search's bound each way."""
    allocations: int
    beyond: int  # the largest recorded value
    continued_bytes_at_bound: int
    held_bytes_at_bound: int


class SweepValidation(TypedDict):
    """The size model fitted on all recordings but the largest, checked on that one."""
    value: int
    exact: int  # allocations whose size it predicted exactly
    requests: int
    bytes_error: float  # |predicted - recorded| / recorded, over all allocated bytes


class SweepCheck(TypedDict):
    """How far the size model can be trusted: its check (None with fewer than three
    recordings), the values whose recording is a window of its run (its history starts in the
    middle of a step), and the memory each recording's history starts with cached."""
    validation: Optional[SweepValidation]
    windows: List[int]
    # each recording's memory cached but free at its first event, and whether they differ by
    # more than a large segment (histories begun after warm-up steps at their sizes)
    cached_at_start: List["CachedAtStart"]
    warm_starts_differ: bool


class CachedAtStart(TypedDict):
    value: int
    bytes: int


class _SweepReportAlways(TypedDict):
    card_bytes: int
    context_bytes: int
    bound: int
    plans: List[SweepPlan]
    sweep: SweepCheck


class SweepReport(_SweepReportAlways, total=False):
    """plan_sweep()'s report."""
    limit_bytes: int
    guessed_sizes: GuessedSizes


class MicroBatchPlan(Plan):
    """The first setting's plan accumulating gradients over `passes` micro-batches."""
    passes: int
    micro_batch: int


class _AccumulationReportAlways(TypedDict):
    batch: int
    at_batch: PlanReport
    gradient_accumulation: List[MicroBatchPlan]
    cheapest: Optional[Cheapest]  # None: nothing fits
    sweep: SweepCheck


class AccumulationReport(_AccumulationReportAlways, total=False):
    """plan_accumulation()'s report: the remedies at a batch size."""
    warnings: List[str]


class TorchVersion(TypedDict):
    """The PyTorch release a replay followed, and what told it (`--torch-version`, or the
    snapshot's fields)."""
    version: str
    told_by: str


class FleetSetting(TypedDict):
    """One setting planned for one device history of a fleet."""
    alloc_conf: str
    min_limit_bytes: int
    fits: bool


class SiteBytes(TypedDict):
    """A source line and the bytes it held at the OOM."""
    site: str
    bytes: int


class _FleetDeviceAlways(TypedDict):
    device: int
    events: int
    alloc_conf: str
    oom: bool
    needed_bytes: int
    fits: bool
    margin_bytes: int
    best_alloc_conf: str
    best_margin_bytes: int
    limit_bytes: Optional[int]  # the OOM advisor's limit beside the file, where it left one
    peak_reserved_bytes: int
    fragmentation: float
    reserved_unallocated_at_peak_bytes: int
    leak: bool
    growth_bytes_per_step: float
    settings: List[FleetSetting]
    sites_at_oom: List[SiteBytes]


class FleetDevice(_FleetDeviceAlways, total=False):
    """One device history of one snapshot, as `allocsim fleet --job` gives it."""
    torch_version: TorchVersion  # where its replays followed another release than 2.11


class FleetRow(FleetDevice):
    """One device history of one snapshot in fleet()'s report."""
    file: str


class _FleetJobAlways(TypedDict):
    file: str


class FleetJob(_FleetJobAlways, total=False):
    """One file's result, as `allocsim fleet --job` prints it: `devices` and `warnings`, or
    `error`."""
    content_hash: str  # the key the cache keeps it under; none where the file could not be opened
    devices: List[FleetDevice]
    warnings: List[str]
    error: str
    cached: bool


class FleetFailure(TypedDict):
    """A file fleet() could not read, with its one-line error."""
    file: str
    error: str


class FleetSettingTotals(TypedDict):
    alloc_conf: str
    jobs_fitting: int
    ooms_avoided: int


class FleetSiteTotals(TypedDict):
    site: str
    bytes: int
    jobs: int


class FleetTotals(TypedDict):
    devices: int
    ooms: int
    fitting_as_recorded: int
    leaking: int
    reserved_unallocated_at_peak_bytes: int
    settings: List[FleetSettingTotals]
    top_sites_at_oom: List[FleetSiteTotals]


class FleetPairGroup(TypedDict):
    label: str  # a source line, or a step and position
    delta_at_peak: int


class FleetPairDevice(TypedDict):
    device: int
    peak_reserved_a: int
    peak_reserved_b: int
    difference: int
    program: int  # of the difference, the part B's requests make under A's allocator
    allocator: int  # and the part B's allocator makes of the same requests
    same_allocator: bool
    top_groups: List[FleetPairGroup]


class _FleetPairAlways(TypedDict):
    a: str
    b: str


class FleetPair(_FleetPairAlways, total=False):
    """One job's two runs in fleet()'s report: B against A, per device; or `error`."""
    devices: List[FleetPairDevice]
    error: str


class _FleetReportAlways(TypedDict):
    card_bytes: int
    jobs: int
    jobs_from_cache: int
    failed: List[FleetFailure]
    rows: List[FleetRow]
    totals: FleetTotals


class FleetReport(_FleetReportAlways, total=False):
    """fleet()'s report, as `allocsim fleet --json` writes it."""
    pairs: List[FleetPair]  # where pairs were given


class AdviceSetting(TypedDict):
    alloc_conf: str
    min_limit_bytes: int
    fits: bool
    margin_bytes: int
    device_call_seconds: float


class EmptyCacheAdvice(TypedDict):
    alloc_conf: str
    min_limit_bytes: int
    fits: bool
    margin_bytes: int
    extra_device_allocs: int
    extra_device_seconds: float


class AccumulationAdvice(TypedDict):
    passes: int
    micro_batch: int
    min_limit_bytes: int
    fits: bool
    margin_bytes: int


class LargestValue(TypedDict):
    alloc_conf: str
    max_value: int


class _AdviceAlways(TypedDict):
    device: int
    oom: bool
    message: Optional[str]  # PyTorch's OOM message, where the history ends at one
    request_bytes: Optional[int]
    limit_bytes: int
    reserved_bytes: int
    allocated_bytes: int
    cached_free_bytes: int
    largest_free_block_bytes: Optional[int]
    needed_bytes: Optional[int]
    missing_bytes: Optional[int]
    settings: List[AdviceSetting]
    cheapest: Optional[Cheapest]
    smallest_card_bytes: Optional[int]
    sites: List[Dict[str, Any]]  # the source lines holding the most at the OOM
    warnings: List[str]
    empty_cache_per_step: Optional[EmptyCacheAdvice]
    text: str  # the lines to print


class Advice(_AdviceAlways, total=False):
    """advise()'s result. With recordings and a batch: the remedies at that batch; with
    recordings alone: the largest value that fits, per setting."""
    batch: int
    gradient_accumulation: List[AccumulationAdvice]
    cheapest_at_batch: Optional[Cheapest]
    largest_values: List[LargestValue]
    recorded_values: List[int]


class DiffRun(TypedDict):
    """One run of a diff, replayed as recorded."""
    trace: str
    device: int
    events: int
    allocations: int
    requested_bytes: int  # summed over its allocations
    alloc_conf: str
    torch_version: str
    capacity_bytes: int
    context_bytes: int
    memory_fraction: Optional[float]
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    fragmentation: float
    peak_segments: int
    device_allocs: int  # cudaMalloc calls
    oom_event: Optional[int]  # where its replay stopped at an OOM
    allocated_peak_event: int
    live_at_peak_bytes: int  # its allocations' bytes live there
    steps: Optional[int]  # the steps the optimizer's annotations show


class DiffPairing(TypedDict):
    by: str  # what the pairing went by
    source_lines: bool  # the groups are source lines
    same_size: int
    size_changed: int
    only_a: int
    only_b: int


class DiffGroup(TypedDict):
    """Allocations of one source line (or a run of them by step and position)."""
    label: str
    same_size: int
    size_changed: int
    only_a: int
    only_b: int
    bytes_a: int
    bytes_b: int
    at_peak_a: int  # live at A's allocated peak
    at_peak_b: int
    delta_at_peak: int  # at_peak_b - at_peak_a


class ReservedParting(TypedDict):
    """The first paired request after which the runs' reserved memory differs."""
    a_event: int
    b_event: int
    a_reserved: int
    b_reserved: int
    a_size: int
    b_size: int
    site: Optional[str]


class DiffSplit(TypedDict):
    """B - A split: program = b_under_a - a, allocator = b - b_under_a (and the other order)."""
    a: int
    b: int
    difference: int
    b_under_a: int  # B's requests under A's allocator
    program: int
    allocator: int
    a_under_b: int
    program_other_order: int
    allocator_other_order: int


class DiffSplits(TypedDict):
    same_allocator: bool
    peak_reserved: DiffSplit
    peak_allocated: DiffSplit
    b_under_a_oom_event: Optional[int]
    a_under_b_oom_event: Optional[int]


class DiffReport(TypedDict):
    """diff()'s report, as `allocsim diff --json` writes it."""
    a: DiffRun
    b: DiffRun
    pairing: DiffPairing
    groups: List[DiffGroup]  # those that differ, the most at the peaks first
    groups_alike: int
    reserved_parting: Optional[ReservedParting]
    split: DiffSplits
    warnings: List[str]
