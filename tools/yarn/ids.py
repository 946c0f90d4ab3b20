"""YARN's ids as strings and as protobufs, both ways, as Hadoop writes them.

``application_<cluster timestamp>_<id, 4 digits at least>`` and
``container_[e<epoch>_]<cluster timestamp>_<app id, 4 digits>_<attempt, 2 digits>_<id, 6 digits>``
(``ContainerId.toString``: the epoch is the container id's bits above the 40th). The AM's
own container (id 1) names its attempt: :func:`attempt_of`.
"""
from __future__ import annotations

import re

from .proto import yarn_pb2 as yarn

_APP = re.compile(r"application_(\d+)_(\d+)")
_CONTAINER = re.compile(r"container_(?:e(\d+)_)?(\d+)_(\d+)_(\d+)_(\d+)")
_CONTAINER_ID_BITS = 40


class BadYarnId(ValueError):
    """A string that is not a YARN application or container id."""


def app_id_text(proto: yarn.ApplicationIdProto) -> str:
    return f"application_{proto.cluster_timestamp}_{proto.id:04d}"


def app_id_proto(text: str) -> yarn.ApplicationIdProto:
    match = _APP.fullmatch(text)
    if match is None:
        raise BadYarnId(f"{text!r}: expected a YARN application id (application_<timestamp>_<n>)")
    return yarn.ApplicationIdProto(cluster_timestamp=int(match[1]), id=int(match[2]))


def container_id_text(proto: yarn.ContainerIdProto) -> str:
    epoch, number = proto.id >> _CONTAINER_ID_BITS, proto.id & ((1 << _CONTAINER_ID_BITS) - 1)
    app = proto.app_attempt_id.application_id if proto.HasField("app_attempt_id") else proto.app_id
    return (f"container_{f'e{epoch}_' if epoch else ''}{app.cluster_timestamp}_{app.id:04d}_"
            f"{proto.app_attempt_id.attemptId:02d}_{number:06d}")


def container_id_proto(text: str) -> yarn.ContainerIdProto:
    match = _CONTAINER.fullmatch(text)
    if match is None:
        raise BadYarnId(f"{text!r}: expected a YARN container id (container_<timestamp>_<app>_<attempt>_<n>)")
    epoch, stamp, app, attempt, number = (int(g) if g else 0 for g in match.groups())
    app_id = yarn.ApplicationIdProto(cluster_timestamp=stamp, id=app)
    return yarn.ContainerIdProto(app_id=app_id, app_attempt_id=yarn.ApplicationAttemptIdProto(
        application_id=app_id, attemptId=attempt), id=(epoch << _CONTAINER_ID_BITS) | number)


def attempt_of(container_id: str) -> tuple[str, int]:
    """The application and attempt number of a container (the AM's own: ``CONTAINER_ID``)."""
    proto = container_id_proto(container_id)
    return app_id_text(proto.app_attempt_id.application_id), proto.app_attempt_id.attemptId
