"""``rsilab agent``: run an external agent's command inside the sandbox, as one campaign role.

The command (CMD) runs in :class:`~rsilab.sandbox.BwrapSandbox` with two ways out and no
others: its workspace (read-write, at :data:`WORKSPACE`), and the Experiment OS served over
MCP on a Unix socket that is bound into the sandbox. No network (a new network namespace with
loopback only; a third way out, to its own LLM endpoints, only when asked for: see below),
and the lab, its ledger keys and the task's data files are not visible: a workspace or
``--bind-ro`` folder that holds or lies in the lab is refused, as is one that holds the task's
data files or lies in their folder (:mod:`rsilab.mcp.task_data`), before it is lent to the
sandbox user; the sandbox masks those files besides. What CMD finds at ``/rsilab`` (read-only):

- ``/rsilab/mcp.sock``: the socket; each connection is one MCP session as ``--role`` on the
  campaign, every call role-checked, validated and recorded (:mod:`rsilab.mcp.socket_server`).
- ``/rsilab/bin/rsilab-mcp``: the bridge (:mod:`rsilab.mcp.bridge`), a stdio MCP server command
  that joins an MCP client to the socket.
- ``/rsilab/mcp.json``: an ``mcpServers`` config naming that command, for clients that read one
  (e.g. ``claude --mcp-config /rsilab/mcp.json``).

and in its environment: ``RSILAB_MCP_SOCKET``, ``RSILAB_MCP_COMMAND`` (the bridge command line,
shell-quoted), ``RSILAB_MCP_CONFIG``, ``RSILAB_WORKSPACE``, ``RSILAB_CAMPAIGN``, ``RSILAB_ROLE``,
``RSILAB_ACTOR`` and, with endpoints, ``RSILAB_LLM_ENDPOINTS`` (space-separated), plus what
``--env`` passes; nothing else of the caller's environment.

With ``--llm-endpoint HOST:PORT`` (:mod:`rsilab.mcp.llm_endpoints`), CMD can also reach its own
LLM endpoints and nothing else on the network: before CMD starts, ``/rsilab/bin/rsilab-net``
(:mod:`rsilab.mcp.netrelay`) listens at each endpoint's place on the sandbox's loopback (the
sandbox's ``/etc/hosts`` maps each host name there) and relays each connection, byte for byte,
through a Unix socket in ``/rsilab/net`` to the host, which connects to HOST:PORT
(:mod:`rsilab.mcp.llm_relay`) and records every connection in the ledger
(:data:`NET_ACTION`: endpoint, bytes each way, seconds). TLS stays end to end.

Tool path arguments are relative to the workspace root, as for every caller: the host checks
them against the host folder, so an absolute ``/workspace/...`` path is refused (and flagged).

With ``--bind-ro DIR`` (:mod:`rsilab.mcp.agent_binds`), the agent's own installation is shown
read-only at its own path: it is never in the workspace, so never in a snapshot.

The session is recorded in the ledger: :data:`SESSION_START` before CMD starts (the command)
and :data:`SESSION_END` when it has ended (exit status, limit, output dropped, wall time). CMD's
output past :data:`OUTPUT_BYTES` per stream is dropped, and counted in the end event, while CMD
goes on: an agent's verbose log is no reason to stop it.

Without bubblewrap there is no such boundary, so :func:`run_agent` refuses rather than run
CMD unconfined. CMD's stdin is empty (agents run headless); its stdout and stderr are streamed
to the caller as they are written.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path, PurePosixPath

from rsilab.errors import ToolError, UserError
from rsilab.expos import CallContext, ExperimentOS, default_registry, find_campaign
from rsilab.expos.services import LabServices
from rsilab.mcp.agent_binds import check_binds
from rsilab.mcp.agent_ledger import NET_ACTION as NET_ACTION
from rsilab.mcp.agent_ledger import SESSION_END as SESSION_END
from rsilab.mcp.agent_ledger import SESSION_START as SESSION_START
from rsilab.mcp.agent_ledger import exit_status as exit_status
from rsilab.mcp.agent_ledger import recorder, session_end, session_start
from rsilab.mcp.llm_endpoints import Served, hosts_file, plan, relay_config
from rsilab.mcp.llm_relay import relay_endpoints
from rsilab.mcp.server import build_server
from rsilab.mcp.socket_server import socket_endpoint
from rsilab.mcp.task_data import check_clear, data_files, data_places
from rsilab.records import Campaign, Role
from rsilab.sandbox import (
    WORKSPACE,
    BwrapSandbox,
    Confinement,
    Limits,
    Mount,
    RunResult,
    RunSpec,
    SandboxError,
)
from rsilab.sandbox.owners import owned_prefix
from rsilab.sandbox.select import ENV_VAR, choose_sandbox
from rsilab.store.keys import key_dir
from rsilab.store.lab import Lab
from rsilab.tasks import Task

log = logging.getLogger(__name__)

INSIDE = PurePosixPath("/rsilab")
"""Where the socket, the bridge and the config appear inside the sandbox (read-only)."""
SOCKET = INSIDE / "mcp.sock"
BRIDGE = INSIDE / "bin" / "rsilab-mcp"
CONFIG = INSIDE / "mcp.json"
LAUNCHER = INSIDE / "bin" / "rsilab-net"
NET = INSIDE / "net"
"""The endpoints' sockets, the relay's config and the hosts file shown at /etc/hosts."""
ROLES = (Role.WORKER, Role.REVIEWER)
"""Roles an external agent may hold. Main is not one: see :func:`check_role`."""

_ACTOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED_ENV = ("PATH", "HOME", "TMPDIR")
OUTPUT_BYTES = 64 * 1024 * 1024
"""Output passed on per stream; the rest is dropped (and counted), and the agent goes on."""


@dataclass(frozen=True)
class AgentOptions:
    """What ``rsilab agent`` was asked to do; checked by :func:`run_agent`.

    Attributes:
        argv: CMD and its arguments, run inside the sandbox (argv[0] on the sandbox's PATH).
        campaign: campaign id or ``latest``.
        role: the role the agent holds (:data:`ROLES`).
        actor: the name recorded as the caller; also names the default workspace.
        workspace: host folder shown at /workspace; default ``<lab>/workspaces/<campaign>/<actor>``.
        lab: lab folder (``Lab.open`` resolves None).
        wall_s, memory_mb, disk_mb: limits of CMD's whole process tree (disk: its workspace
            and its /tmp).
        env: extra environment variables for CMD.
        llm_endpoints: ``HOST:PORT`` of each LLM endpoint CMD may reach (see the module).
        bind_ro: host folders shown read-only at their own path (the agent's installation;
            checked by :func:`rsilab.mcp.agent_binds.check_binds`).
    """

    argv: tuple[str, ...]
    campaign: str
    role: Role = Role.WORKER
    actor: str = "worker-ext-1"
    workspace: Path | None = None
    lab: Path | None = None
    wall_s: float = 3600.0
    memory_mb: int = 4096
    disk_mb: int = 2048
    env: Mapping[str, str] = field(default_factory=dict)
    llm_endpoints: tuple[str, ...] = ()
    bind_ro: tuple[Path, ...] = ()


def check_role(role: Role) -> None:
    """Refuse a role an external agent may not hold, saying why.

    Raises:
        UserError: for main (it steers the whole campaign and is run by ``rsilab run``), and
            for roles that are not agents.
    """
    if role in ROLES:
        return
    if role is Role.MAIN:
        raise UserError(
            "the main role cannot be run as an external agent: it steers the whole campaign "
            "(directions, budget, which Workers run) and is held by the campaign runner",
            "run the campaign with `rsilab run`, and attach external agents as "
            "--role worker (or reviewer)",
        )
    raise UserError(
        f"{role} is not a role an external agent can hold",
        f"use one of: {', '.join(str(r) for r in ROLES)}",
    )


def check_options(options: AgentOptions) -> None:
    """Checks that need no lab: a command, a role, a name, limits, variables, endpoints.

    Raises:
        UserError: what is wrong, and what to pass instead.
    """
    if not options.argv or not options.argv[0]:
        raise UserError(
            "no command to run was given",
            "put the agent's command after `--`, e.g. "
            "`rsilab agent --campaign latest -- claude -p 'improve the model'`",
        )
    check_role(options.role)
    if not _ACTOR.match(options.actor):
        raise UserError(
            f"--actor {options.actor!r} is not a usable name",
            "use letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit",
        )
    if options.wall_s <= 0 or options.memory_mb <= 0 or options.disk_mb <= 0:
        raise UserError(
            "--wall, --memory and --disk must be positive", "e.g. --wall 30m --memory 4G"
        )
    for name, value in options.env.items():
        if not _ENV_NAME.match(name) or "\0" in value or name in _RESERVED_ENV:
            raise UserError(
                f"--env {name!r} cannot be passed to the agent",
                "pass NAME=VALUE with a NAME of letters, digits and '_' "
                f"(not {', '.join(_RESERVED_ENV)}, which the sandbox sets)",
            )
    plan(options.llm_endpoints)


def require_bwrap(confinement: Confinement | None = None) -> BwrapSandbox:
    """The prepared bubblewrap sandbox; refuses the plain-process fallback.

    Raises:
        UserError: bubblewrap cannot be used here, or ``RSILAB_SANDBOX=process`` asks not to.
    """
    why = (
        "`rsilab agent` promises that the agent can reach nothing but its workspace and the "
        "Experiment OS, and only bubblewrap keeps that promise"
    )
    choice = choose_sandbox(confinement=confinement)
    if isinstance(choice.sandbox, BwrapSandbox):
        return choice.sandbox
    choice.sandbox.close()
    if choice.bwrap_problem is not None:
        raise UserError(
            f"bubblewrap cannot be used here ({choice.bwrap_problem.message}); {why}",
            choice.bwrap_problem.hint or "install bubblewrap (`apt-get install -y bubblewrap`)",
        )
    raise UserError(
        f"{ENV_VAR}=process runs jobs as plain processes, with no sandbox; {why}",
        f"unset {ENV_VAR} (or set it to bwrap); without a sandbox, use `rsilab mcp` and accept "
        "that it limits which tools the agent calls, not what else it can read",
    )


def workspace_for(lab: Lab, campaign: Campaign, options: AgentOptions) -> Path:
    """The host folder CMD works in, made if it is the default.

    Raises:
        UserError: a given folder that does not exist, or lies in the lab outside its
            ``workspaces`` folder (the agent would see lab files).
    """
    lab_root = lab.path.resolve()
    if options.workspace is None:
        folder = lab_root / "workspaces" / campaign.id / options.actor
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    folder = options.workspace.resolve()
    if not folder.is_dir():
        raise UserError(
            f"workspace {options.workspace} is not a folder",
            "create it first, or leave --workspace out to use the agent's folder in the lab",
        )
    if folder.is_relative_to(lab_root) and not folder.is_relative_to(lab_root / "workspaces"):
        raise UserError(
            f"workspace {folder} is inside the lab, where the agent would see the lab's files",
            "leave --workspace out, or pass a folder outside the lab",
        )
    return folder


def agent_workspace(services: LabServices, folder: Path, options: AgentOptions) -> Path:
    """``folder`` made the lab's workspace: the sandbox user's for good, and its own
    filesystem of ``--disk`` MiB where the sandbox can (see ``LabServices.workspace``).

    Raises:
        UserError: the folder holds the lab, or its filesystem cannot be made.
    """
    try:
        return services.workspace(folder, options.disk_mb)
    except OSError as exc:
        raise UserError(
            f"the workspace {folder} could not be made ready: {exc}",
            "run `rsilab doctor` to see what the sandbox lacks",
        ) from exc


def campaign_task(services: LabServices, campaign: Campaign) -> Task:
    """The campaign's task, whose data files the agent must not see.

    Raises:
        UserError: the task cannot be loaded, so its data files are not known.
    """
    try:
        return services.task_of(campaign)
    except ToolError as exc:
        raise UserError(
            f"{exc.message}; its private data files cannot be hidden from the agent",
            "run the agent on a machine where the campaign's task is installed",
        ) from None


def hidden_paths(lab: Lab, task: Task) -> tuple[Path, ...]:
    """What CMD must not see even where the workspace holds it: the lab, the ledger keys and
    the task's data files (splits, pool, declared sources)."""
    return (lab.path, key_dir(), *data_files(task))


TASK_DATA_HINT = (
    "leave --workspace out (rsilab makes one in LAB/workspaces, and prepare_workspace fills it "
    "with the harness alone), or use a folder apart from the task's data"
)
BIND_DATA_HINT = (
    "install the agent outside the task's folders (e.g. under /opt/agents) and bind that"
)


def _source(module: str) -> bytes:
    return resources.files("rsilab.mcp").joinpath(f"{module}.py").read_bytes()


def bridge_command(python: Path) -> list[str]:
    """The bridge's command line inside the sandbox (the runtime's python, isolated mode)."""
    return [str(python), "-I", str(BRIDGE)]


def _readable_folder(path: Path) -> None:
    """Make ``path`` with mode 0755 whatever the umask: mkdir's mode is masked by it, and a
    launch under ``umask 077`` left the folder 0700, locking the sandbox user out."""
    path.mkdir()
    path.chmod(0o755)


def write_inside(folder: Path, python: Path, served: Sequence[Served] = ()) -> None:
    """Fill ``folder`` (shown at :data:`INSIDE`) with the bridge and the MCP config, and, with
    endpoints, the launcher and :data:`NET` (its config and the hosts file); readable and
    traversable by the sandbox user, writable by no one there (the bind is read-only)."""
    folder.chmod(0o755)
    _readable_folder(folder / "bin")
    programs = {BRIDGE.name: "bridge", **({LAUNCHER.name: "netrelay"} if served else {})}
    for name, module in programs.items():
        program = folder / "bin" / name
        program.write_bytes(_source(module))
        program.chmod(0o755)
    if served:
        net = folder / NET.name
        _readable_folder(net)
        files = {
            "relays.json": json.dumps(relay_config(served, NET), indent=2) + "\n",
            "hosts": hosts_file(served),
        }
        for name, text in files.items():
            (net / name).write_text(text)
            (net / name).chmod(0o444)
    command = bridge_command(python)
    config = {
        "mcpServers": {
            "rsilab": {
                "type": "stdio",
                "command": command[0],
                "args": command[1:],
                "env": {"RSILAB_MCP_SOCKET": str(SOCKET)},
            }
        }
    }
    (folder / CONFIG.name).write_text(json.dumps(config, indent=2) + "\n")
    (folder / CONFIG.name).chmod(0o644)


def sandbox_argv(options: AgentOptions, python: Path, served: Sequence[Served]) -> tuple[str, ...]:
    """What the sandbox runs: CMD, behind the launcher when there are endpoints to serve."""
    if not served:
        return tuple(options.argv)
    config = NET / "relays.json"
    return (str(python), "-I", str(LAUNCHER), str(config), "--", *options.argv)


def check_ports(served: Sequence[Served], sandbox: BwrapSandbox) -> None:
    """Refuse ports below 1024 where the sandbox user cannot listen on them.

    As root, the sandbox lets its user bind any port in the job's own network namespace;
    without root, the sandbox runs in a user namespace that keeps the kernel's default.

    Raises:
        UserError: naming the endpoints, and what to do instead.
    """
    low = [str(s.endpoint) for s in served if s.endpoint.port < 1024]
    if low and not sandbox.root:
        raise UserError(
            f"--llm-endpoint {', '.join(low)}: without root, the sandbox cannot listen on "
            "ports below 1024, so the agent could not reach it at that port",
            "run `rsilab agent` as root, or serve the LLM on a port from 1024 up "
            "(e.g. a local proxy on localhost:8443) and give that",
        )


def agent_env(
    options: AgentOptions, campaign: Campaign, python: Path, served: Sequence[Served] = ()
) -> dict[str, str]:
    """CMD's environment: where things are, who it is, its endpoints and ``options.env``."""
    env = dict(options.env)
    if served:
        env["RSILAB_LLM_ENDPOINTS"] = " ".join(str(s.endpoint) for s in served)
    env.update(
        RSILAB_MCP_SOCKET=str(SOCKET),
        RSILAB_MCP_COMMAND=shlex.join(bridge_command(python)),
        RSILAB_MCP_CONFIG=str(CONFIG),
        RSILAB_WORKSPACE=str(WORKSPACE),
        RSILAB_CAMPAIGN=campaign.id,
        RSILAB_ROLE=str(options.role),
        RSILAB_ACTOR=options.actor,
    )
    return env


def check_command(argv0: str, sandbox: BwrapSandbox) -> None:
    """Refuse a bare command name the sandbox's PATH does not hold (a path is left to CMD).

    Raises:
        UserError: naming the folders searched.
    """
    if "/" in argv0:
        return
    path = os.pathsep.join([str(sandbox.runtime.bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])
    if shutil.which(argv0, path=path) is None:
        raise UserError(
            f"{argv0!r} is not a program the sandbox can run: it is not in {path}",
            "the sandbox shows only /usr and rsilab's runtime venv; install the agent under "
            "/usr (e.g. /usr/local/bin), or name a program in the workspace as ./PROGRAM",
        )


def run_agent(options: AgentOptions, relay: Callable[[int, bytes], None]) -> RunResult:
    """Run ``options.argv`` confined, as ``options.role`` on the campaign; see the module
    docstring. ``relay(fd, chunk)`` receives CMD's output as it comes (fd 1 or 2).

    Raises:
        UserError: a bad option, no lab, no such campaign, no bubblewrap -- all before CMD
            runs, and nothing recorded -- or a sandbox that cannot start CMD (recorded as a
            session that ended unstarted).
    """
    check_options(options)
    with Lab.open(options.lab) as lab:
        campaign = find_campaign(lab.store, options.campaign)
        services = LabServices(lab)
        try:
            task = campaign_task(services, campaign)
            hidden = hidden_paths(lab, task)
            places = data_places(task)
            folder = workspace_for(lab, campaign, options)
            check_clear(folder, places, "workspace", TASK_DATA_HINT)  # before it is lent
            sandbox = require_bwrap(services.confinement)
            try:
                workspace = agent_workspace(services, folder, options)
                private = [("the lab", lab.path), ("the ledger key folder", key_dir())]
                binds = check_binds(options.bind_ro, [*private, ("the workspace", workspace)])
                for bound in binds:
                    check_clear(bound, places, f"--bind-ro {bound}:", BIND_DATA_HINT)
                check_command(options.argv[0], sandbox)
                check_ports(plan(options.llm_endpoints), sandbox)
                ctx = CallContext(options.actor, options.role, campaign.id, workspace)
                expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
                mounts = tuple(Mount.same(folder) for folder in binds)
                return _confined(options, campaign, ctx, expos, sandbox, (hidden, mounts), relay)
            finally:
                sandbox.close()
        finally:
            services.close(wait=True)  # let a proposal being judged reach its verdict


def _confined(
    options: AgentOptions,
    campaign: Campaign,
    ctx: CallContext,
    expos: ExperimentOS,
    sandbox: BwrapSandbox,
    places: tuple[Sequence[Path], Sequence[Mount]],
    relay: Callable[[int, bytes], None],
) -> RunResult:
    hidden, binds = places
    assert ctx.workspace is not None
    python = sandbox.runtime.python
    limits = Limits(
        cpu_s=options.wall_s * (os.cpu_count() or 1),  # the wall clock is the real bound
        memory_mb=options.memory_mb,
        processes=512,
        wall_s=options.wall_s,
        output_bytes=OUTPUT_BYTES,
        disk_mb=options.disk_mb,
        file_mb=min(options.disk_mb, 1024),
        truncate_output=True,
    )
    served = plan(options.llm_endpoints)
    with tempfile.TemporaryDirectory(prefix=owned_prefix("agent")) as tmp:
        folder = Path(tmp)
        write_inside(folder, python, served)
        mounts = [Mount(folder, Path(INSIDE)), *binds]
        if served:
            mounts.append(Mount(folder / NET.name / "hosts", Path("/etc/hosts")))
        spec = RunSpec(
            argv=sandbox_argv(options, python, served),
            workspace=ctx.workspace,
            limits=limits,
            env=agent_env(options, campaign, python, served),
            mounts=tuple(mounts),
            hidden=tuple(hidden),
            on_output=relay,
        )
        owner = (sandbox.uid, sandbox.gid)  # the user CMD runs as: the only one to connect
        endpoints = [s.endpoint for s in served]
        with (
            socket_endpoint(
                folder / SOCKET.name,
                lambda: build_server(expos, ctx),
                partial(expos.refused_message, ctx),
                owner,
            ),
            relay_endpoints(folder / NET.name, endpoints, recorder(expos.store, ctx), owner),
        ):
            log.info(
                "running %s as %s (%s) on %s", options.argv[0], ctx.actor, ctx.role, ctx.campaign_id
            )
            session_start(expos.store, ctx, options.argv)
            try:
                result = sandbox.run(spec)
            except (SandboxError, ValueError) as exc:
                session_end(expos.store, ctx, None, f"not started: {exc}")
                raise UserError(
                    f"the sandbox could not start the agent: {exc}",
                    "run `rsilab doctor` to see what the sandbox lacks",
                ) from exc
            except BaseException:  # interrupted: the sandbox has ended CMD's whole tree
                session_end(expos.store, ctx, None, "interrupted: the agent was stopped")
                raise
            session_end(expos.store, ctx, result)
            return result
