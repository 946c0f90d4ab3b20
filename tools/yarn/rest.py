"""The ResourceManager's REST API (``/ws/v1/cluster``): submit, kill and watch applications
without Java.

A client submits an application in two calls (``new-application``, then ``apps`` with
the AM container's command, environment and resources); everything the AM does after
that goes over Hadoop IPC (:mod:`.ipc`). The RM answers an error with a JSON
``RemoteException`` (its Java exception class and message): :class:`RestError` carries them.

In simple-auth mode the RM takes the caller as ``hadoop.http.staticuser.user`` (the
local cluster sets it to the user who started it); ``user.name=`` names the submitter.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

GPU = "yarn.io/gpu"
#: the states an application ends in
FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})


class RestError(RuntimeError):
    """The RM refused a request or could not be reached: ``status`` (0 when unreachable),
    the RM's exception class (``exception``) and its message."""

    def __init__(self, what: str, status: int, exception: str, message: str):
        self.what, self.status, self.exception, self.message = what, status, exception, message
        super().__init__(f"{what}: {exception + ': ' if exception else ''}{message}"
                         + (f" (HTTP {status})" if status else ""))


@dataclass
class AMSpec:
    """What the RM needs to start an application's AM container."""

    name: str
    commands: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 256
    vcores: int = 1
    gpus: int = 0
    queue: str = "default"
    max_app_attempts: int = 1
    keep_containers_across_attempts: bool = False
    application_type: str = "GANGMASTER"
    #: the job's ``gangmaster: priority``: YARN's application priority (the RM puts it in the
    #: ApplicationSubmissionContext's priority; it caps it at ``yarn.cluster.max-application-priority``,
    #: 0 unless configured, and orders a queue's applications by it)
    priority: int = 0

    def body(self, app_id: str) -> dict:
        """The JSON body of ``POST /ws/v1/cluster/apps``."""
        resource: dict = {"memory": self.memory_mb, "vCores": self.vcores}
        if self.gpus:
            resource["resourceInformations"] = {"resourceInformation": [{"name": GPU, "value": self.gpus}]}
        return {
            "application-id": app_id,
            "application-name": self.name,
            "queue": self.queue,
            "application-type": self.application_type,
            "priority": self.priority,
            "am-container-spec": {
                "commands": {"command": " ; ".join(self.commands) if len(self.commands) > 1 else self.commands[0]},
                "environment": {"entry": [{"key": k, "value": v} for k, v in self.environment.items()]},
            },
            "resource": resource,
            "max-app-attempts": self.max_app_attempts,
            "keep-containers-across-application-attempts": self.keep_containers_across_attempts,
            "unmanaged-AM": False,
        }


class YarnRest:
    """The RM's REST API at ``base`` (``http://127.0.0.1:8088``)."""

    def __init__(self, base: str, user: str | None = None, timeout_s: float = 10.0):
        self.base = base.rstrip("/")
        self.user = user
        self.timeout_s = timeout_s

    def _request(self, method: str, path: str, body: dict | None = None, what: str = "") -> dict:
        url = f"{self.base}/ws/v1/cluster{path}"
        if self.user:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"user.name": self.user})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Accept": "application/json", "Content-Type": "application/json"})
        what = what or f"{method} {path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise _rest_error(what, exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RestError(what, 0, "", f"the ResourceManager at {self.base} cannot be reached ({reason})") from None
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except ValueError:
            raise RestError(what, 200, "", f"expected JSON, got {text[:120]!r}") from None

    # -------------------------------------------------------------- applications
    def new_application(self) -> dict:
        """A new application id and the cluster's largest container (``maximum-resource-capability``)."""
        return self._request("POST", "/apps/new-application", what="new-application")

    def submit(self, spec: AMSpec) -> str:
        """Submit an application whose AM is ``spec``; its id."""
        app_id = self.new_application()["application-id"]
        self._request("POST", "/apps", spec.body(app_id), what=f"submit {app_id}")
        return app_id

    def kill(self, app_id: str) -> dict:
        return self._request("PUT", f"/apps/{app_id}/state", {"state": "KILLED"}, what=f"kill {app_id}")

    def application(self, app_id: str) -> dict:
        """The application report: ``state``, ``finalStatus``, ``diagnostics``, ``amContainerLogs``..."""
        return self._request("GET", f"/apps/{app_id}", what=f"application {app_id}").get("app", {})

    def attempts(self, app_id: str) -> list[dict]:
        answer = self._request("GET", f"/apps/{app_id}/appattempts", what=f"attempts of {app_id}")
        return (answer.get("appAttempts") or {}).get("appAttempt") or []

    # -------------------------------------------------------------- cluster
    def nodes(self) -> list[dict]:
        return ((self._request("GET", "/nodes", what="nodes").get("nodes") or {}).get("node")) or []

    def conf(self, key: str) -> str:
        """One key of the RM's running configuration (its ``/conf`` servlet)."""
        url = f"{self.base}/conf?" + urllib.parse.urlencode({"name": key})
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())["property"]["value"]
        except urllib.error.HTTPError as exc:
            raise _rest_error(f"conf {key}", exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            raise RestError(f"conf {key}", 0, "", f"the ResourceManager at {self.base} cannot be reached "
                                                  f"({getattr(exc, 'reason', exc)})") from None
        except (ValueError, KeyError, TypeError):
            raise RestError(f"conf {key}", 200, "", "expected {\"property\": {\"value\": ...}}") from None

    def info(self) -> dict:
        return self._request("GET", "/info", what="cluster info").get("clusterInfo", {})


def _rest_error(what: str, status: int, body: bytes) -> RestError:
    try:
        remote = json.loads(body).get("RemoteException", {})
    except (ValueError, AttributeError):
        remote = {}
    if remote:
        return RestError(what, status, remote.get("exception", ""), remote.get("message", ""))
    return RestError(what, status, "", body.decode("utf-8", "replace").strip()[:300] or "no message")
