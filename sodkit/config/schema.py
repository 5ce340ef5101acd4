"""Typed configuration sections; the defaults here are the documentation of every key.

A recipe YAML sets only what differs from these defaults. Field comments are shown to users by
``sodkit`` error messages and the README, so keep them short and exact. Every numeric key states
its allowed range with :func:`~sodkit.config.ranges.ranged` (``low``/``high``: inclusive bounds,
``above``/``below``: strict ones; always finite); the loader checks them when it builds a section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .ranges import path_field, ranged

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
# input sides (data.size, data.size_list, predict/export --size): below 16 pixels the backbone's
# coarsest level is under a pixel; above 4096 a single image needs gigabytes of activations
MIN_SIZE, MAX_SIZE = 16, 4096
MAX_SECONDS = 30 * 24 * 3600  # time limits: 30 days, well inside what a timedelta holds
SIZE_MULTIPLE = 32  # data.size_range's draws are floored to it (BiRefNet's custom_collate_fn)
# data.preprocess: the inference pipelines (sodkit/inference/pipelines.py)
Preprocess = Literal["sodkit", "minet", "f3net", "birefnet", "birefnet-card"]


@dataclass
class DatasetCfg:
    """One folder dataset: images and masks paired by file stem."""

    name: str = ""  # shown in results; defaults to the preset name or the root folder's name
    preset: str | None = None  # a registered preset (sodkit/data/presets.py): duts-tr, ecssd, ...
    root: str = ""  # absolute, or relative to the top-level `data_root`
    image_dir: str = ""  # sub-folder of root holding the images (a preset fills it)
    mask_dir: str = ""  # sub-folder of root holding the masks (a preset fills it)
    list_file: str | None = None  # optional text file of stems to use (one per line)
    # sub-folder of root holding trimaps (0 / 128 / 255, by stem; a matting preset fills it
    # where its release ships them): eval.compute [matting] of a test set then measures their
    # unknown pixels only
    trimap_dir: str = ""


@dataclass
class DataCfg:
    train: list[DatasetCfg] = field(default_factory=list)
    test: list[DatasetCfg] = field(default_factory=list)
    size: int = ranged(320, low=MIN_SIZE, high=MAX_SIZE)  # training and test input side (square)
    # multi-scale: a size per batch from this list: a side (square) or [height, width]
    size_list: list[int | list[int]] = ranged(factory=list, low=MIN_SIZE, high=MAX_SIZE)
    # multi-scale from ranges: [[min height, max height], [min width, max width]], each side
    # drawn per batch and floored to a multiple of 32 (BiRefNet's dynamic_size); [] = off
    size_range: list[list[int]] = ranged(factory=list, low=MIN_SIZE, high=MAX_SIZE)
    batch_size: int = ranged(8, above=0)  # per process
    test_batch_size: int = ranged(8, above=0)  # per process
    # loader processes; None = from the core count (resources.py)
    num_workers: int | None = ranged(None, low=0)
    pin_memory: bool = True  # page-locked batches for non_blocking copies (CUDA only)
    persistent_workers: bool = True  # keep the training loader's workers between epochs
    prefetch_factor: int = ranged(2, above=0)  # batches each worker prepares ahead
    hflip: float = ranged(0.5, low=0, high=1, hint="a probability")  # of a horizontal flip
    # max degrees of the random rotation (0 disables)
    rotation: float = ranged(10.0, low=0, high=180, hint="degrees; 0 disables")
    # probability of that rotation (BiRefNet: 0.2)
    rotation_p: float = ranged(1.0, low=0, high=1, hint="a probability")
    # brightness/contrast/saturation strength (0 disables)
    color_jitter: float = ranged(0.1, low=0, high=1, hint="0 disables")
    # BiRefNet's colour enhance on every image: brightness and contrast x 0.5-1.5, colour
    # x 0-2, sharpness x 0-3, in steps of 0.1 (sodkit/data/augment.py)
    color_enhance: bool = False
    # pepper noise: this fraction of the pixels drawn and set to black or white (BiRefNet:
    # 0.0015); 0 disables
    pepper: float = ranged(0.0, low=0, high=1, hint="a fraction of the pixels; 0 disables")
    # random crop before resizing: each side loses a random share of up to this fraction at a
    # random offset (F3Net: 0.125); 0 disables
    crop: float = ranged(0.0, low=0, below=1,
                         hint="a fraction of each side; F3Net: 0.125")
    # training masks >= this become 1, others 0 (MINet: 0.5)
    binarize: float | None = ranged(None, above=0, high=1,
                                    hint="a threshold, MINet: 0.5, or null")
    # unreadable training pairs skipped with a warning; more stop the run
    max_bad_samples: int = ranged(20, low=0)
    # per channel (R, G, B) of images scaled to [0, 1]
    mean: list[float] = ranged(factory=lambda: list(IMAGENET_MEAN), low=0, high=1, length=3,
                               hint="R, G, B of images scaled to [0, 1]; ImageNet: "
                                    "0.485, 0.456, 0.406")
    std: list[float] = ranged(factory=lambda: list(IMAGENET_STD), above=0, high=1,
                              length=3, hint="R, G, B of images scaled to [0, 1]; ImageNet: "
                                             "0.229, 0.224, 0.225")
    # inference pipeline of test, predict and the API (sodkit/inference/pipelines.py): sodkit
    # (antialiased resize, data.mean/std, probabilities resized bilinearly to the image), or
    # minet / f3net / birefnet / birefnet-card (the authors' own, for their released weights:
    # import-weights records it);
    # null: the checkpoint's own, else sodkit
    preprocess: Preprocess | None = None
    # training pairs held out as the test set `val`, chosen by a hash of the stem (the same
    # pairs whatever files are added); null: none
    val_fraction: float | None = ranged(None, above=0, below=1,
                                        hint="a fraction of the training pairs, e.g. 0.1, or null")


@dataclass
class BiRefNetCfg:
    """``model.birefnet``: the original's model options (its config.py names); the defaults are
    the released general model's. See sodkit/network/birefnet.py."""

    mul_scl_ipt: Literal["", "add", "cat"] = "cat"  # the backbone also runs at half size
    cxt_num: int = ranged(3, low=0, high=3)  # finer levels joined to the coarsest one
    dec_ipt: bool = True  # image inputs to every decoder level
    dec_ipt_split: bool = True  # ... as the image cut in patches stacked on channels
    dec_att: Literal["", "ASPP", "ASPPDeformable"] = "ASPPDeformable"  # in every decoder block
    squeeze_block: Literal["", "BasicDecBlk_x1", "ResBlk_x4", "ASPP_x3",
                           "ASPPDeformable_x3"] = "BasicDecBlk_x1"
    dec_blk: Literal["BasicDecBlk", "ResBlk"] = "BasicDecBlk"
    ms_supervision: bool = True  # side outputs of the three coarser decoder levels
    out_ref: bool = True  # gradient reference branch (attention; its maps in training)
    # BatchNorm in the decoder; the original drops every one for a per-GPU batch of 1
    # (`BatchNorm2d(...) if config.batch_size > 1 else Identity()`): auto = data.batch_size > 1
    batchnorm: bool | Literal["auto"] = "auto"


@dataclass
class ModelCfg:
    name: str = "fpn"  # a registered network
    backbone: str = "resnet50"  # any timm model name that supports features_only
    # backbone weights: a local timm/torchvision file (.pth, .safetensors), "timm" (timm's own
    # ImageNet weights via its hub cache: the only download sodkit makes), or null (scratch)
    pretrained: str | None = None
    decoder_channels: int = ranged(64, above=0)
    # backbone levels: auto (the strides the network needs, from timm's feature_info), a list of
    # level indices, or null (every level timm gives by default)
    out_indices: list[int] | Literal["auto"] | None = ranged("auto", low=0)
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)  # extra timm.create_model args
    # gradient checkpointing: recompute activations in backward instead of keeping them
    checkpointing: Literal["off", "backbone", "decoder", "all"] = "off"
    # parameters left out of training, by dotted name prefix (`model.named_parameters()`), e.g.
    # [backbone.body.conv1, backbone.body.bn1] (F3Net's code never trains the stem); BatchNorm
    # statistics still update
    freeze: list[str] = field(default_factory=list)
    # fine-tuning: a NEW run (fresh optimizer, schedule, epochs) starting from a trained model's
    # weights: a sodkit checkpoint, a model file (.safetensors) or a weights file in sodkit's
    # tensor names (.safetensors, weights-only .pt); strict: every tensor must fit (init_exclude)
    init_from: str | None = path_field(None)
    # a checkpoint's weights to start from: ema (its EMA average when it has one) or model
    init_weights: Literal["ema", "model"] = "ema"
    # tensors left at their fresh initialisation, by dotted name prefix, e.g. [heads]
    init_exclude: list[str] = field(default_factory=list)
    birefnet: BiRefNetCfg = field(default_factory=BiRefNetCfg)  # model.name: birefnet only


@dataclass
class LossPhaseCfg:
    """One ``loss.schedule`` entry: from epoch ``from_epoch`` to the end (or the next phase's
    own changes), term weights are set (``terms``) and/or multiplied (``scale``)."""

    # first epoch of the phase, counted from 1 as the log shows it; negative -N: the last N
    from_epoch: int = 1
    terms: dict[str, float] = field(default_factory=dict)  # name -> weight from then on
    scale: dict[str, float] = field(default_factory=dict)  # name -> factor on its weight
    # true: the factors apply again every epoch of the phase (factor ** epochs into it, the
    # first epoch included), as BiRefNet's train.py multiplies its weights in place each epoch
    per_epoch: bool = False


@dataclass
class LossCfg:
    # name -> weight (`bce: 1`), or name -> {weight: w, <the term's own parameters>}
    # (`ssim: {weight: 1, window: 11}`); checked against the registered terms by build_criterion
    terms: dict[str, Any] = field(default_factory=lambda: {"bce": 1.0, "iou": 1.0})
    # weight of each side output's loss (deep supervision); 0 disables
    aux_weight: float = ranged(1.0, low=0, hint="0 disables")
    # one weight per side output, in the network's "aux" order; replaces aux_weight when set
    aux_weights: list[float] | None = ranged(None, low=0)
    # weight of the main output's terms (F3Net: 0.5)
    main_weight: float = ranged(1.0, above=0)
    # side outputs: false = mask area-downsampled to each side's size (cheap); true = side logits
    # bilinearly upsampled to the mask's size first (F3Net's code; sharp boundaries for the
    # boundary-weighted structure loss)
    aux_upsample: bool = False
    # with aux_upsample: resize with align_corners=True (BiRefNet's loss.py PixLoss)
    aux_align_corners: bool = False
    # BiRefNet: weight of the gradient reference supervision (BCE of each level's gradient
    # logits against its target, sodkit/loss/gradient.py); 0 disables. The original: 1.0
    gradient_weight: float = ranged(0.0, low=0, hint="0 disables")
    # term weights changed by epoch (sodkit/loss/schedule.py), e.g. BiRefNet's last epochs:
    # [{from_epoch: -20, scale: {bce: 0, iou: 0.5, mae: 0.9}, per_epoch: true}]
    schedule: list[LossPhaseCfg] = field(default_factory=list)

    @property
    def uses_aux(self) -> bool:
        """Whether any side output is trained (if not, networks skip computing them)."""
        if self.aux_weights is not None:
            return any(w > 0 for w in self.aux_weights)
        return self.aux_weight > 0


@dataclass
class OptimCfg:
    name: Literal["sgd", "adam", "adamw"] = "adamw"
    # for the decoder; the backbone gets lr * backbone_lr_factor
    lr: float = ranged(1e-3, above=0, hint="a zero learning rate trains nothing")
    backbone_lr_factor: float = ranged(
        0.1, low=0, hint="0 keeps the backbone's weights; a negative factor would train it by "
                         "gradient ascent")
    # not applied to norm layers and biases unless decay_all
    weight_decay: float = ranged(1e-4, low=0)
    decay_all: bool = False  # weight decay on every parameter, biases and norms too (F3Net's code)
    # layer-wise lr decay of the backbone (timm's layer ids, e.g. 0.75 for a ViT-B): each layer's
    # lr is the backbone's x layer_decay ** (layers above it); null = off
    layer_decay: float | None = ranged(None, above=0, high=1)
    momentum: float = ranged(0.9, low=0, below=1)  # sgd
    nesterov: bool = False  # sgd
    betas: list[float] = ranged(factory=lambda: [0.9, 0.999], low=0, below=1,
                                length=2, hint="adam's two decay rates, e.g. [0.9, 0.999]")
    lr_scaling: Literal["none", "linear", "sqrt"] = "none"  # by global batch / base_batch_size
    base_batch_size: int = ranged(8, above=0)  # the global batch size `lr` was tuned for


@dataclass
class ScheduleCfg:
    # triangular: F3Net's 1 - |2 (i + 1) / (N + 1) - 1| rise and fall over the N units
    name: Literal["constant", "poly", "cosine", "step", "triangular"] = "poly"
    # step: the LR changes every optimizer step; epoch: it is set once per epoch from the epoch
    # index (MINet's and F3Net's code); warm-up follows the same unit
    interval: Literal["step", "epoch"] = "step"
    # linear warm-up length (fractions allowed); steps per iteration
    warmup_epochs: float = ranged(0.0, low=0)
    # LR at the start of warm-up, as a fraction of the LR
    warmup_factor: float = ranged(0.01, low=0, high=1)
    power: float = ranged(0.9, above=0)  # poly
    # poly and cosine end at lr * min_lr_factor
    min_lr_factor: float = ranged(0.0, low=0, high=1)
    # step: epochs at which LR *= gamma; a negative -N counts from the end (the LR is
    # decayed in the last N epochs)
    milestones: list[float] = ranged(factory=list, hint="epochs; -N: the last N epochs")
    gamma: float = ranged(0.1, above=0)  # step


@dataclass
class TrainCfg:
    epochs: int = ranged(50, above=0)
    # cap on optimizer steps per epoch (None = whole epoch)
    steps_per_epoch: int | None = ranged(None, above=0, hint="null runs whole epochs")
    accumulate: int = ranged(1, above=0)  # gradient accumulation: batches per optimizer step
    grad_clip: float | None = ranged(  # max global gradient norm
        None, above=0,
        hint="a negative norm would flip the gradients; null disables clipping")
    log_every: int = ranged(20, above=0)  # steps between log lines / TensorBoard scalars
    # steps between TensorBoard image grids (0 disables)
    image_every: int = ranged(200, low=0, hint="0 disables")
    checkpoint_every: int = ranged(1, above=0)  # epochs between checkpoints/last.pt writes
    # also keep checkpoints/epoch_NNNN.pt every N epochs (0 = never)
    keep_every: int = ranged(0, low=0, hint="0 = never")
    # also save every N optimizer steps, in mid-epoch (0 = off)
    checkpoint_every_steps: int = ranged(0, low=0, hint="0 = off")
    # also save every N minutes of training (0 = off)
    checkpoint_minutes: float = ranged(0.0, low=0, hint="0 = off")
    # newest step_*.pt files kept (a damaged newest one falls back)
    keep_checkpoints: int = ranged(2, above=0)
    # steps with non-finite gradients skipped before the run stops
    max_bad_steps: int = ranged(0, low=0)
    auto_resume: bool = False  # as --resume auto: continue the run folder (elastic restarts)
    freeze_bn: bool = False  # BatchNorm in eval mode (running stats fixed; affine still trains)
    # EMA of the weights (e.g. 0.999): updated after each optimizer step, evaluated, saved as
    # the checkpoint's "ema"; test/predict use it by default. null: off
    ema_decay: float | None = ranged(None, above=0, below=1,
                                     hint="e.g. 0.999, or null")


@dataclass
class EvalCfg:
    # evaluate every N epochs during training (0 = only at the end)
    every: int = ranged(0, low=0, hint="0 = only at the end")
    # metric that picks checkpoints/best.pt: a result key, a family's too (HCE, mBA, maxBIoU...:
    # its family is then computed); errors (MAE, BER, HCE, MSE, siMAE) are minimised
    metric: str = "maxFm"
    metric_dataset: str | None = None  # dataset for `metric`; None = mean over test sets
    save_predictions: bool = True
    num_samples: int = ranged(8, low=0)  # test images shown in samples.png
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"  # autocast dtype of evaluation
    # test-time augmentation in evaluation, test and predict: [hflip] = mean of the plain and
    # the mirrored pass's probabilities
    tta: list[Literal["hflip"]] = field(default_factory=list)
    # also evaluate before the first step (epoch 0: the starting model, e.g. model.init_from's)
    at_start: bool = False
    # optional metric families computed as well, by their names in the families' registry
    # (sodkit/metrics/families.py: MSE, HCE, SI, MSIoU, BIoU, mBA, CM, CCM, matting; checked
    # before training), e.g. [HCE, BIoU, mBA] for DIS, [matting] for alpha mattes (SAD, MSE,
    # MAD, Grad, Conn; over a test set's trimap_dir's unknown region where it has one); [all]
    # for every one but CCM (it reads the images: name it). Default: none
    compute: list[str] = field(default_factory=list)


@dataclass
class RuntimeCfg:
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    seed: int = ranged(42, low=0, high=2**32 - 1)  # numpy's seed range
    deterministic: bool = False
    # autocast dtype (fp16 needs CUDA); fp64: weights, activations and losses in float64, no
    # autocast (several times slower: for numerical checks whose round-off must not decide)
    precision: Literal["fp32", "fp16", "bf16", "fp64"] = "fp32"
    # torch intra-op threads per process; None = from the cores
    num_threads: int | None = ranged(None, above=0, hint="null: from the cores")
    sync_bn: bool = False  # BatchNorm statistics over all processes (CUDA SyncBatchNorm, or CPU)
    # a collective waiting longer (a lost process) ends the job
    dist_timeout_s: float = ranged(600.0, above=0, high=MAX_SECONDS,
                                   hint="seconds")
    # collectives: auto = nccl on CUDA, gloo on CPU; gloo also runs CUDA tensors (e.g. two
    # processes sharing one GPU, which NCCL refuses)
    dist_backend: Literal["auto", "nccl", "gloo"] = "auto"
    # after SIGTERM/SIGINT the run finishes its step and saves; if it is still running this
    # many seconds later (blocked in a collective with a lost peer), it exits (0 = never)
    stop_grace_s: float = ranged(120.0, low=0, high=MAX_SECONDS, hint="seconds; 0 = never")
    channels_last: bool = False  # NHWC memory format for the model and the images
    compile: bool = False  # torch.compile the training model (refused where it cannot work)


@dataclass
class Config:
    name: str = "run"  # run folder is <output_root>/<name>
    output_root: str = path_field("output")  # "~" is the home folder, here and in every path
    data_root: str = path_field("")  # base folder for relative dataset roots
    data: DataCfg = field(default_factory=DataCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    loss: LossCfg = field(default_factory=LossCfg)
    optim: OptimCfg = field(default_factory=OptimCfg)
    schedule: ScheduleCfg = field(default_factory=ScheduleCfg)
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    runtime: RuntimeCfg = field(default_factory=RuntimeCfg)
