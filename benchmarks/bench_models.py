"""The networks the CPU inference benchmarks (issue 35) build, by the name their --model takes:
each a recipe with random weights (``model.pretrained=null``; speed does not depend on them).
No heavy import here: the harnesses that only start processes stay light."""

SWIN_T = "swin_tiny_patch4_window7_224"
MODELS = {  # name: (recipe, overrides, what the table calls it)
    "demo-fpn": ("configs/demo.yaml", [], "demo FPN (ResNet-18, 160 px)"),
    "minet-r50": ("configs/duts_minet_r50.yaml", ["model.pretrained=null"],
                  "MINet-R50 (320 px)"),
    "birefnet-swint": ("configs/general_birefnet_swinl.yaml",
                       [f"model.backbone={SWIN_T}", "model.pretrained=null"],
                       "BiRefNet Swin-T (1024 px)"),
}
