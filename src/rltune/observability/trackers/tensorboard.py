"""TensorBoard: event files in ``<job dir>/tensorboard`` (or ``dir``), written with the
tensorboard package's own event writer (no TensorFlow, no torch). The "run id" is the log
folder: a resumed job appends new event files to the same folder. TensorBoard has no tables,
so the sample trajectories, the job config and the training doctor's alerts
(``doctor/alerts``) are text in the Text tab."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from tensorboard.compat.proto import types_pb2
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from rltune.config.observability import TrackerConfig
from rltune.observability.trackers.base import TABLE_COLUMNS, local_dir


def _text_value(tag: str, text: str) -> Summary.Value:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode()],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary.Value(tag=tag, metadata=meta, tensor=tensor)


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, cfg: TrackerConfig, *, job_dir: Path, job_name: str):
        self.cfg, self.job_dir = cfg, job_dir
        self.writer: Any = None

    def _write(self, step: int, values: list[Summary.Value]) -> None:
        self.writer.add_event(Event(wall_time=time.time(), step=step,
                                    summary=Summary(value=values)))
        self.writer.flush()

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        logdir = Path(resume_id) if resume_id else local_dir(self.cfg.dir, self.job_dir,
                                                              "tensorboard")
        logdir.mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(logdir))
        if not resume_id:
            import yaml

            text = yaml.safe_dump(params, sort_keys=False)
            self._write(0, [_text_value("config", "```yaml\n" + text + "\n```")])
        return str(logdir)

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self._write(step, [Summary.Value(tag=k, simple_value=v) for k, v in values.items()])

    def table(self, step: int, rows: list[list[Any]]) -> None:
        def cell(v: Any) -> str:
            return str(v).replace("|", "\\|").replace("\n", " ")[:300]

        lines = ["| " + " | ".join(TABLE_COLUMNS) + " |",
                 "|" + "---|" * len(TABLE_COLUMNS)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
        self._write(step, [_text_value("samples", "\n".join(lines))])

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        self._write(step, [_text_value("doctor/alerts", text)])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
