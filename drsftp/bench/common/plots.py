"""matplotlib for the bench's plots: loaded headless where installed (the bench extras)."""

from __future__ import annotations

from typing import Any


def save_figure(plt: Any, fig: Any, axes: Any, path: str) -> str:
    """Grid and legend on every panel, the figure written to ``path``."""
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt
