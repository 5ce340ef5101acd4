"""Dataset presets: the usual folder layouts of the public SOD benchmarks and the demo data.

A config then needs only ``{preset: ecssd}`` (with ``data_root`` pointing at the folder that holds
``ECSSD/``). Every preset lists the layouts it knows, most common first; ``resolve_dataset`` takes
the first one whose two folders exist under the root, so both the official release and the
``Image``/``Mask`` repack found in most SOD code bases work without extra keys. ``image_dir`` and
``mask_dir`` in the config always win over the preset.

Assumed layouts, relative to the dataset root (first = default):

========== =========== ======================================================================
preset     root        image dir / mask dir
========== =========== ======================================================================
duts-tr    DUTS-TR     DUTS-TR-Image/DUTS-TR-Mask (official); Image/Mask; Imgs/GT
duts-te    DUTS-TE     DUTS-TE-Image/DUTS-TE-Mask (official); Image/Mask; Imgs/GT
ecssd      ECSSD       Image/Mask; images/ground_truth_mask (official CUHK); Imgs/GT
hku-is     HKU-IS      Image/Mask; imgs/gt (official); Imgs/GT
pascal-s   PASCAL-S    Image/Mask; Imgs/GT; datasets/imgs/pascal / datasets/masks/pascal (official)
dut-omron  DUT-OMRON   Image/Mask; DUT-OMRON-image/pixelwiseGT-new-PNG (official); Imgs/GT
soc        SOC         TestSet/Imgs / TestSet/gt (SOC-6K release, test split); Image/Mask; Imgs/GT
camo       CAMO        Imgs/GT (the SINet-V2 test repack); Images/Test / GT (CAMO-V.1.0
                       release); Image/GT; Image/Mask
cod10k     COD10K      Imgs/GT (SINet-V2 test repack); Test/Image / Test/GT_Object (COD10K-v3
                       release, test split); Image/GT_Object; Image/Mask
nc4k       NC4K        Imgs/GT (release); Image/GT; Image/Mask
chameleon  CHAMELEON   Imgs/GT (SINet-V2 test repack); Image/GT; Image/Mask
dis-tr     DIS5K/      im/gt (the DIS5K release, and BiRefNet's DIS5K task folder); Image/Mask
           DIS-TR
dis-vd     DIS5K/      im/gt; Image/Mask
           DIS-VD
dis-te1..4 DIS5K/      im/gt; Image/Mask
           DIS-TE1..4
hrsod-tr   HRSOD       HRSOD_train/HRSOD_train_mask (the HRSOD_release folder's content);
                       TR-HRSOD/im / TR-HRSOD/gt (BiRefNet's HRSOD task folder); Image/Mask
hrsod-te   HRSOD       HRSOD_test/HRSOD_test_mask; TE-HRSOD/im / TE-HRSOD/gt; Image/Mask
uhrsd-tr   UHRSD       UHRSD_TR_2K/image / UHRSD_TR_2K/mask (release, PGNet); TR-UHRSD/im /
                       TR-UHRSD/gt (BiRefNet's); Image/Mask
uhrsd-te   UHRSD       UHRSD_TE_2K/image / UHRSD_TE_2K/mask; TE-UHRSD/im / TE-UHRSD/gt
davis-s    DAVIS-S     im/gt (BiRefNet's); images/masks (InSPyReNet's repack); Image/Mask; Imgs/GT
p3m-10k    P3M-10k     train/blurred_image / train/mask (release); im/gt (BiRefNet's)
p3m-500-p  P3M-10k     validation/P3M-500-P/blurred_image / .../mask, trimaps .../trimap; im/gt
p3m-500-np P3M-10k     validation/P3M-500-NP/original_image / .../mask, trimaps .../trimap; im/gt
am-2k-tr   AM-2k       train/original / train/mask (release); im/gt
am-2k-te   AM-2k       validation/original / validation/mask, trimaps validation/trimap; im/gt
d646-tr    Distinc-    Train/FG / Train/GT (release: foregrounds, composited by most code bases;
           tions-646   BiRefNet's are composites on BG-20k in im/gt)
d646-te    Distinc-    Test/FG / Test/GT (no trimaps in the release); im/gt
           tions-646
aim-500    AIM-500     original / mask, trimaps trimap (release); im/gt
demo-train cache       DEMO-TR/images / DEMO-TR/masks (generated on first use)
demo-test  cache       DEMO-TE/images / DEMO-TE/masks (generated on first use)
========== =========== ======================================================================

Camouflaged-object detection (COD) uses the same metrics on the same kind of masks, so its test
sets are presets too. In the COD10K-v3 release, ``Test/Image`` also holds the 1,974
non-camouflaged images, which have no object mask: they are reported as images without a mask
and skipped, leaving the 2,026 camouflaged test images that papers evaluate.

The high-resolution sets (DIS5K: 1,024 px to 8K photos; HRSOD, UHRSD: 2K-4K; DAVIS-S: 1080p
video frames) are those of BiRefNet's tasks (its ``config.py``: ``<data_root_dir>/DIS5K/DIS-TR/im``
and ``.../gt``, ``<data_root_dir>/HRSOD/TR-HRSOD/im`` ...). BiRefNet's packaged HRSOD task
folder holds HRSOD, UHRSD and DAVIS-S side by side under ``HRSOD/``: for that package, point
the UHRSD and DAVIS-S presets at it, ``{preset: uhrsd-tr, root: HRSOD, name: UHRSD-TR}``,
``{preset: davis-s, root: HRSOD/DAVIS-S}``. The HRSOD release's own folders (``HRSOD_train``,
``HRSOD_train_mask``, ...) and UHRSD's (``UHRSD_TR_2K/image``, ``.../mask``) are as their
authors' code reads them; DAVIS-S has no release layout of its own (it comes with HRSOD's
authors' results), so its usual repacks are listed.

The matting presets (alpha mattes: soft masks) list the trimap folder their release ships,
found like the layouts (``trimap_dir`` in the config wins); ``eval.compute: [matting]`` then
measures a test set's unknown region. BiRefNet's Matting task (config.py:29, 38: trained on
every folder under ``<data_root>/Matting`` but TE-P3M-500-NP and TE-AM-2k; its README's general
matting model: P3M-10k, humans, AM-2k, AIM-500, Human-2k and Distinctions-646 composited on
BG-20k, HIM2K, PPM-100) keeps each set as ``<name>/im`` and ``<name>/gt``: point a preset at
such a folder with ``root`` (``{preset: p3m-500-np, root: Matting/TE-P3M-500-NP}``).

The demo presets' root is ``$SODKIT_CACHE/demo-v<N>`` (default: the platform's user cache
folder, ``~/.cache/sodkit`` on Linux: :mod:`sodkit.cache`), read when a
config is resolved so that the environment variable can be set late (tests do).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache import cache_dir
from ..registry import Registry
from . import synthetic

logger = logging.getLogger(__name__)

Layout = tuple[str, str]  # (image_dir, mask_dir), relative to the dataset root


@dataclass(frozen=True)
class Preset:
    """Defaults for one dataset; ``prepare`` (if any) makes the data exist under a root."""

    name: str  # default display name
    root: str | Callable[[], str]  # relative to data_root, or absolute; a callable is read late
    layouts: tuple[Layout, ...]  # known (image_dir, mask_dir) pairs, the default first
    prepare: Callable[[Path], None] | None = None
    doc: str = ""
    trimaps: tuple[str, ...] = ()  # trimap folders the release ships, the default first

    def default_root(self) -> str:
        return self.root() if callable(self.root) else self.root


PRESETS: Registry[Any] = Registry("dataset preset")

_REPACK: Layout = ("Image", "Mask")  # the layout of most SOD benchmark repacks
_IMGS_GT: Layout = ("Imgs", "GT")


def _add(key: str, preset: Preset) -> None:
    PRESETS.register(key)(preset)


def get_preset(key: str) -> Preset:
    """The preset registered as ``key``; a KeyError that suggests the closest name otherwise."""
    return PRESETS.get(key)


def demo_root() -> str:
    """Where the demo presets generate their data; the version changes with the generator."""
    return str(cache_dir() / f"demo-v{synthetic.DEMO_VERSION}")


_add("duts-tr", Preset("DUTS-TR", "DUTS-TR", (("DUTS-TR-Image", "DUTS-TR-Mask"), _REPACK,
                                              _IMGS_GT), doc="DUTS training set, 10,553 pairs"))
_add("duts-te", Preset("DUTS-TE", "DUTS-TE", (("DUTS-TE-Image", "DUTS-TE-Mask"), _REPACK,
                                              _IMGS_GT), doc="DUTS test set, 5,019 pairs"))
_add("ecssd", Preset("ECSSD", "ECSSD", (_REPACK, ("images", "ground_truth_mask"), _IMGS_GT),
                     doc="ECSSD, 1,000 pairs"))
_add("hku-is", Preset("HKU-IS", "HKU-IS", (_REPACK, ("imgs", "gt"), _IMGS_GT),
                      doc="HKU-IS, 4,447 pairs"))
_add("pascal-s", Preset("PASCAL-S", "PASCAL-S", (_REPACK, _IMGS_GT, ("datasets/imgs/pascal",
                                                                     "datasets/masks/pascal")),
                        doc="PASCAL-S, 850 pairs"))
_add("dut-omron", Preset("DUT-OMRON", "DUT-OMRON", (_REPACK, ("DUT-OMRON-image",
                                                              "pixelwiseGT-new-PNG"), _IMGS_GT),
                         doc="DUT-OMRON, 5,168 pairs"))
_add("soc", Preset("SOC", "SOC", (("TestSet/Imgs", "TestSet/gt"), _REPACK, _IMGS_GT),
                   doc="SOC test split (salient images and distractor-only images)"))
_add("camo", Preset("CAMO", "CAMO", (_IMGS_GT, ("Images/Test", "GT"), ("Image", "GT"),
                                     _REPACK), doc="CAMO test set (COD), 250 pairs"))
_add("cod10k", Preset("COD10K", "COD10K", (_IMGS_GT, ("Test/Image", "Test/GT_Object"),
                                           ("Image", "GT_Object"), _REPACK),
                      doc="COD10K test set (COD), 2,026 camouflaged pairs"))
_add("nc4k", Preset("NC4K", "NC4K", (_IMGS_GT, ("Image", "GT"), _REPACK),
                    doc="NC4K (COD), 4,121 pairs"))
_add("chameleon", Preset("CHAMELEON", "CHAMELEON", (_IMGS_GT, ("Image", "GT"), _REPACK),
                         doc="CHAMELEON (COD), 76 pairs"))
_IM_GT: Layout = ("im", "gt")  # DIS5K's release, and every BiRefNet task folder
_add("dis-tr", Preset("DIS-TR", "DIS5K/DIS-TR", (_IM_GT, _REPACK),
                      doc="DIS5K training set, 3,000 pairs (high resolution)"))
_add("dis-vd", Preset("DIS-VD", "DIS5K/DIS-VD", (_IM_GT, _REPACK),
                      doc="DIS5K validation set, 470 pairs"))
for _i in range(1, 5):
    _add(f"dis-te{_i}", Preset(f"DIS-TE{_i}", f"DIS5K/DIS-TE{_i}", (_IM_GT, _REPACK),
                               doc=f"DIS5K test set {_i}, 500 pairs"))
_add("hrsod-tr", Preset("HRSOD-TR", "HRSOD", (("HRSOD_train", "HRSOD_train_mask"),
                                              ("TR-HRSOD/im", "TR-HRSOD/gt"), _REPACK),
                        doc="HRSOD training set, 1,610 pairs (high resolution)"))
_add("hrsod-te", Preset("HRSOD-TE", "HRSOD", (("HRSOD_test", "HRSOD_test_mask"),
                                              ("TE-HRSOD/im", "TE-HRSOD/gt"), _REPACK),
                        doc="HRSOD test set, 400 pairs"))
_add("uhrsd-tr", Preset("UHRSD-TR", "UHRSD", (("UHRSD_TR_2K/image", "UHRSD_TR_2K/mask"),
                                              ("TR-UHRSD/im", "TR-UHRSD/gt"), _REPACK),
                        doc="UHRSD training set, 5,920 pairs (4K)"))
_add("uhrsd-te", Preset("UHRSD-TE", "UHRSD", (("UHRSD_TE_2K/image", "UHRSD_TE_2K/mask"),
                                              ("TE-UHRSD/im", "TE-UHRSD/gt"), _REPACK),
                        doc="UHRSD test set, 988 pairs (4K)"))
_add("davis-s", Preset("DAVIS-S", "DAVIS-S", (_IM_GT, ("images", "masks"), _REPACK, _IMGS_GT),
                       doc="DAVIS-S (HRSOD's), 92 pairs of 1080p frames"))
# Alpha-matting sets (soft masks: train them with data.binarize null, measure them with
# eval.compute [matting]); the second layout is BiRefNet's Matting task folder (im, gt).
_add("p3m-10k", Preset("P3M-10k", "P3M-10k", (("train/blurred_image", "train/mask"), _IM_GT),
                       doc="P3M-10k training set, 9,421 face-blurred portraits (alpha mattes)"))
for _split, _images in (("P", "blurred_image"), ("NP", "original_image")):
    _folder = f"validation/P3M-500-{_split}"
    _add(f"p3m-500-{_split.lower()}", Preset(
        f"P3M-500-{_split}", "P3M-10k", ((f"{_folder}/{_images}", f"{_folder}/mask"), _IM_GT),
        trimaps=(f"{_folder}/trimap", "trimap"),
        doc=f"P3M-10k test set, 500 {'face-blurred' if _split == 'P' else 'unblurred'} "
            f"portraits, with trimaps"))
_add("am-2k-tr", Preset("AM-2k-TR", "AM-2k", (("train/original", "train/mask"), _IM_GT),
                        doc="AM-2k training set, 1,800 animals (alpha mattes)"))
_add("am-2k-te", Preset("AM-2k-TE", "AM-2k", (("validation/original", "validation/mask"),
                                              _IM_GT),
                        trimaps=("validation/trimap", "trimap"),
                        doc="AM-2k test set, 200 animals, with trimaps"))
_add("d646-tr", Preset("Distinctions-646-TR", "Distinctions-646", (("Train/FG", "Train/GT"),
                                                                   _IM_GT),
                       doc="Distinctions-646 training set, 596 foregrounds and alphas"))
_add("d646-te", Preset("Distinctions-646-TE", "Distinctions-646", (("Test/FG", "Test/GT"),
                                                                   _IM_GT),
                       doc="Distinctions-646 test set, 50 foregrounds and alphas (no trimaps)"))
_add("aim-500", Preset("AIM-500", "AIM-500", (("original", "mask"), _IM_GT),
                       trimaps=("trimap",),
                       doc="AIM-500, 500 natural images of any object (alpha mattes), with "
                           "trimaps"))
_add("demo-train", Preset("DEMO-TR", demo_root, (("DEMO-TR/images", "DEMO-TR/masks"),),
                          prepare=synthetic.generate_demo, doc="synthetic demo, training split"))
_add("demo-test", Preset("DEMO-TE", demo_root, (("DEMO-TE/images", "DEMO-TE/masks"),),
                         prepare=synthetic.generate_demo, doc="synthetic demo, test split"))
