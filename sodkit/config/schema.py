"""Typed configuration sections; the defaults here are the documentation of every key.

A recipe YAML sets only what differs from these defaults. Field comments are shown to users by
``sodkit`` error messages and the README, so keep them short and exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


@dataclass
class DatasetCfg:
    """One folder dataset: images and masks paired by file stem."""

    name: str = ""  # shown in results; defaults to the preset name or the root folder's name
    preset: str | None = None  # duts-tr, duts-te, ecssd, hku-is, pascal-s, dut-omron, soc, demo-*
    root: str = ""  # absolute, or relative to the top-level `data_root`
    image_dir: str = ""  # sub-folder of root holding the images (a preset fills it)
    mask_dir: str = ""  # sub-folder of root holding the masks (a preset fills it)
    list_file: str | None = None  # optional text file of stems to use (one per line)


@dataclass
class DataCfg:
    train: list[DatasetCfg] = field(default_factory=list)
    test: list[DatasetCfg] = field(default_factory=list)
    size: int = 320  # training and test input side (square)
    size_list: list[int] = field(default_factory=list)  # multi-scale: a size per batch from this
    batch_size: int = 8  # per process
    test_batch_size: int = 8  # per process
    num_workers: int | None = None  # loader processes; None = from the core count (resources.py)
    pin_memory: bool = True  # page-locked batches for non_blocking copies (CUDA only)
    persistent_workers: bool = True  # keep the training loader's workers between epochs
    prefetch_factor: int = 2  # batches each worker prepares ahead
    hflip: float = 0.5  # probability of a horizontal flip
    rotation: float = 10.0  # max degrees of the random rotation (0 disables)
    color_jitter: float = 0.1  # brightness/contrast/saturation strength (0 disables)
    # random crop before resizing: each side loses a random share of up to this fraction at a
    # random offset (F3Net: 0.125); 0 disables
    crop: float = 0.0
    binarize: float | None = None  # training masks >= this become 1, others 0 (MINet: 0.5)
    max_bad_samples: int = 20  # unreadable training pairs skipped with a warning; more stop the run
    mean: list[float] = field(default_factory=lambda: list(IMAGENET_MEAN))
    std: list[float] = field(default_factory=lambda: list(IMAGENET_STD))


@dataclass
class ModelCfg:
    name: str = "fpn"  # a registered network
    backbone: str = "resnet50"  # any timm model name that supports features_only
    # backbone weights: a local timm/torchvision file (.pth, .safetensors), "timm" (timm's own
    # ImageNet weights via its hub cache: the only download sodkit makes), or null (scratch)
    pretrained: str | None = None
    decoder_channels: int = 64
    out_indices: list[int] | None = None  # backbone stages to use; None = all
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)  # extra timm.create_model args
    # gradient checkpointing: recompute activations in backward instead of keeping them
    checkpointing: Literal["off", "backbone", "decoder", "all"] = "off"
    # parameters left out of training, by dotted name prefix (`model.named_parameters()`), e.g.
    # [backbone.body.conv1, backbone.body.bn1] (F3Net's code never trains the stem); BatchNorm
    # statistics still update
    freeze: list[str] = field(default_factory=list)


@dataclass
class LossCfg:
    # name -> weight (`bce: 1`), or name -> {weight: w, <the term's own parameters>}
    # (`ssim: {weight: 1, window: 11}`); checked against the registered terms by build_criterion
    terms: dict[str, Any] = field(default_factory=lambda: {"bce": 1.0, "iou": 1.0})
    aux_weight: float = 1.0  # weight of each side output's loss (deep supervision); 0 disables
    # one weight per side output, in the network's "aux" order; replaces aux_weight when set
    aux_weights: list[float] | None = None
    main_weight: float = 1.0  # weight of the main output's terms (F3Net: 0.5)
    # side outputs: false = mask area-downsampled to each side's size (cheap); true = side logits
    # bilinearly upsampled to the mask's size first (F3Net's code; sharp boundaries for the
    # boundary-weighted structure loss)
    aux_upsample: bool = False

    @property
    def uses_aux(self) -> bool:
        """Whether any side output is trained (if not, networks skip computing them)."""
        if self.aux_weights is not None:
            return any(w > 0 for w in self.aux_weights)
        return self.aux_weight > 0


@dataclass
class OptimCfg:
    name: Literal["sgd", "adam", "adamw"] = "adamw"
    lr: float = 1e-3  # for the decoder; the backbone gets lr * backbone_lr_factor
    backbone_lr_factor: float = 0.1
    weight_decay: float = 1e-4  # not applied to norm layers and biases unless decay_all
    decay_all: bool = False  # weight decay on every parameter, biases and norms too (F3Net's code)
    momentum: float = 0.9  # sgd
    nesterov: bool = False  # sgd
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # adam, adamw
    lr_scaling: Literal["none", "linear", "sqrt"] = "none"  # by global batch / base_batch_size
    base_batch_size: int = 8  # the global batch size `lr` was tuned for


@dataclass
class ScheduleCfg:
    # triangular: F3Net's 1 - |2 (i + 1) / (N + 1) - 1| rise and fall over the N units
    name: Literal["constant", "poly", "cosine", "step", "triangular"] = "poly"
    # step: the LR changes every optimizer step; epoch: it is set once per epoch from the epoch
    # index (MINet's and F3Net's code); warm-up follows the same unit
    interval: Literal["step", "epoch"] = "step"
    warmup_epochs: float = 0.0  # linear warm-up length (fractions allowed); steps per iteration
    warmup_factor: float = 0.01  # LR at the start of warm-up, as a fraction of the LR
    power: float = 0.9  # poly
    min_lr_factor: float = 0.0  # poly and cosine end at lr * min_lr_factor
    milestones: list[float] = field(default_factory=list)  # step: epochs at which LR *= gamma
    gamma: float = 0.1  # step


@dataclass
class TrainCfg:
    epochs: int = 50
    steps_per_epoch: int | None = None  # cap on optimizer steps per epoch (None = whole epoch)
    accumulate: int = 1  # gradient accumulation: batches per optimizer step
    grad_clip: float | None = None  # max global gradient norm
    log_every: int = 20  # steps between log lines / TensorBoard scalars
    image_every: int = 200  # steps between TensorBoard image grids (0 disables)
    checkpoint_every: int = 1  # epochs between checkpoints/last.pt writes
    keep_every: int = 0  # also keep checkpoints/epoch_NNNN.pt every N epochs (0 = never)
    checkpoint_every_steps: int = 0  # also save every N optimizer steps, in mid-epoch (0 = off)
    checkpoint_minutes: float = 0.0  # also save every N minutes of training (0 = off)
    keep_checkpoints: int = 2  # newest step_*.pt files kept (a damaged newest one falls back)
    max_bad_steps: int = 0  # steps with non-finite gradients skipped before the run stops
    auto_resume: bool = False  # as --resume auto: continue the run folder (elastic restarts)
    freeze_bn: bool = False  # BatchNorm in eval mode (running stats fixed; affine still trains)
    # EMA of the weights (e.g. 0.999): updated after each optimizer step, evaluated, saved as
    # the checkpoint's "ema"; test/predict use it by default. null: off
    ema_decay: float | None = None


@dataclass
class EvalCfg:
    every: int = 0  # evaluate every N epochs during training (0 = only at the end)
    metric: str = "maxFm"  # metric that picks checkpoints/best.pt (MAE is minimised)
    metric_dataset: str | None = None  # dataset for `metric`; None = mean over test sets
    save_predictions: bool = True
    num_samples: int = 8  # test images shown in samples.png
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"  # autocast dtype of evaluation
    # test-time augmentation in evaluation, test and predict: [hflip] = mean of the plain and
    # the mirrored pass's probabilities
    tta: list[Literal["hflip"]] = field(default_factory=list)


@dataclass
class RuntimeCfg:
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    seed: int = 42
    deterministic: bool = False
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"  # autocast dtype (fp16 needs CUDA)
    num_threads: int | None = None  # torch intra-op threads per process; None = from the cores
    sync_bn: bool = False  # BatchNorm statistics over all processes (CUDA SyncBatchNorm, or CPU)
    dist_timeout_s: float = 600.0  # a collective waiting longer (a lost process) ends the job
    # collectives: auto = nccl on CUDA, gloo on CPU; gloo also runs CUDA tensors (e.g. two
    # processes sharing one GPU, which NCCL refuses)
    dist_backend: Literal["auto", "nccl", "gloo"] = "auto"
    # after SIGTERM/SIGINT the run finishes its step and saves; if it is still running this
    # many seconds later (blocked in a collective with a lost peer), it exits (0 = never)
    stop_grace_s: float = 120.0
    channels_last: bool = False  # NHWC memory format for the model and the images
    compile: bool = False  # torch.compile the training model (refused where it cannot work)


@dataclass
class Config:
    name: str = "run"  # run folder is <output_root>/<name>
    output_root: str = "output"
    data_root: str = ""  # base folder for relative dataset roots
    data: DataCfg = field(default_factory=DataCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    loss: LossCfg = field(default_factory=LossCfg)
    optim: OptimCfg = field(default_factory=OptimCfg)
    schedule: ScheduleCfg = field(default_factory=ScheduleCfg)
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    runtime: RuntimeCfg = field(default_factory=RuntimeCfg)
