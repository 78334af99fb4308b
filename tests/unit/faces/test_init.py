from __future__ import annotations

import subprocess
import sys

import pytest

import idaudit.faces

pytestmark = pytest.mark.faces


def test_import_is_lazy() -> None:
    code = (
        "import sys, idaudit.faces as f; "
        "heavy = [m for m in ('torch', 'dlib', 'onnxruntime', 'facenet_pytorch', 'PIL') "
        "if m in sys.modules]; "
        "assert not heavy, heavy; "
        "f.align; f.estimate_similarity; f.Face; "
        "assert 'dlib' not in sys.modules and 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_public_name_resolves() -> None:
    for name in idaudit.faces.__all__:
        assert getattr(idaudit.faces, name) is not None, name


def test_unknown_name() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        idaudit.faces.Nope  # noqa: B018


@pytest.mark.parametrize(
    ("module", "factory"), [("dlib", "DlibEncoder"), ("facenet_pytorch", "MTCNNDetector")]
)
def test_missing_optional_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, factory: str
) -> None:
    # A None entry makes `import <module>` fail; submodules imported earlier must go too.
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r'pip install "idaudit\[faces\]"'):
        getattr(idaudit.faces, factory)()
