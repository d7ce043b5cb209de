"""Attach a PyTorch training loop to its gossipd peer.

A peer started with ``gossipd --trainer external`` trains nothing itself: it
waits for one training process to attach through its control socket, then
shares the model's parameters with it in memory and does everything else
(membership, partner choice, exchanges, checkpoints). See gossipd-attach(7)
for the protocol this module speaks.

A PyTorch user adds three lines to an ordinary training loop::

    import gossipd

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    peer = gossipd.attach(model)                  # 1: share the parameters
    for x, y in batches:
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        if not peer.step(loss=loss.item()):       # 2: a step boundary
            break                                 #    the peer is leaving
    peer.close()                                  # 3: detach

or uses ``with gossipd.attach(model) as peer:``, which closes on exit.

After ``attach`` every parameter (and, with ``buffers=True``, every
floating-point buffer such as BatchNorm's running statistics) is a view of
the memory the daemon shares: the optimizer's in-place updates land there,
and the averages the daemon mixes in from partners appear in the model at
``peer.step()``, never in the middle of an optimizer step. The Parameter
objects stay the same, so an optimizer made before or after ``attach`` works
either way. What breaks the sharing is giving a parameter new storage after
``attach`` (``model.to(...)``, ``model.double()``, ``param.data = ...``,
replacing a submodule): ``step`` checks for that and raises AttachError;
attach again after such a change.

When the daemon already holds the job's model (it resumed from a checkpoint,
pulled it from the job's members, or an earlier process left it there),
``peer.fresh`` is False and attach loads those values into the model, which
then continues from ``peer.step_count``. When it is fresh, the model's own
initial values become the peer's. attach sends a digest of those values
(BLAKE2b-256, computed once, about a second per GB): in a fresh job, whose
peers agree one starting model (gossipd(8), START), a process whose values
are the very ones the job started from (every process seeded alike) is
answered fresh and keeps them, and its peer pulls nothing (while the
member that started the job is within its first 100 steps).

Evaluation: where the peer's mode keeps one model for the whole job (mode
share: every member holds it, each process's own steps since its last round
on top; gossipd(8), SHARE), the model's first forward in eval mode
(``model.eval()``) computes with the job's model, as every DDP rank does
with the one model, and the first forward back in training mode
(``model.train()``), or ``step()`` after it, puts this process's own back,
so training goes on exactly where it was. The daemon keeps the own model
meanwhile (one float per parameter) and applies nothing to the job's; it is
the model of the peer's last round, up to the round's interval of steps
behind. Where there is none (pairwise modes, before the peer holds a model,
the closing phase) eval mode computes with the process's own model as
before. A loop that goes on training in eval mode trains on from the job's
model (its own last steps are let go at its next step). A model evaluated
some other way (a forward under ``torch.no_grad()`` in training mode, a
submodule's forward) sees the process's own. A model closed in eval mode
keeps the job's values. ``attach(..., evaluate="own")`` turns this off.

By default optimizer state is not shared: momentum and Adam's moments stay in
this process and are not averaged. After a mix a parameter keeps its local
momentum, which steers it on as before; a process that attaches again starts
with the optimizer state it makes (the daemon's checkpoints hold zero
momentum). With ``optimizer=opt`` (a ``torch.optim.SGD`` with momentum) the
momentum buffers are laid after the parameters in the shared memory: the
daemon averages them on the same coordinates as the parameters (as
Hivemind's average_opt_statistics does), and a process that attaches again
gets them back. The shared vector is then twice as long; every peer of the
job must make the same choice.

The daemon's mode share weighs what the members' optimizers moved by the
kind of optimizer (gossipd(8), SHARE: Adam's, AdamW's, Adadelta's,
RMSprop's and Adagrad's steps go in sqrt(n) times further than SGD's).
attach, and if it finds none the first ``step``, looks for the optimizer
over the model's parameters (``optimizer=`` if given, else any
``torch.optim.Optimizer`` alive in the process) and names its kind to the
daemon; with none, several of different kinds, or one of another class
(LBFGS, Rprop, a class of your own) it names nothing and the daemon takes
its ``--optimizer`` (SGD unless set).

In mode share a round sends the coordinates that moved most over the whole
model, which starves whole tensors of small moves: many of a transformer's
bias values went unsent for 100 steps at a time. attach names the
shared tensors of at most one dimension (biases, norms' gains and, with
``buffers=True``, BatchNorm's statistics; under 1% of a usual model) to
the daemon, whose every share then carries them whole beside the top of
the rest (gossipd(8), SHARE); ``attach(..., whole_vectors=False)`` names
none, and leaves them to the top of everything.

Only float32 parameters are shared. A model on a CUDA device stays there:
the shared memory is then a host staging copy, written from the device before
each step request and read back after a reply that mixed something in (this
path has not been run on a GPU yet).

A Peer is not thread-safe: call it from the training loop's thread.
``import gossipd`` does not need torch; ``attach`` does.
"""

import errno
import hashlib
import json
import math
import mmap
import os
import socket

__all__ = ["AttachError", "Peer", "attach", "default_socket"]

PROTOCOL_VERSION = 1
# The control socket's longest line, newline included (<gossipd/control.h>).
MAX_LINE = 65536
# Seconds any one reply may take. Generous: a joiner's attach reply waits
# for the pull of the model from its donors, and with --lag a step reply
# waits for exchanges.
DEFAULT_TIMEOUT = 600.0


class AttachError(OSError, RuntimeError):
    """The daemon refused a request, or the connection to it failed.

    For a refusal, ``str(e)`` is the daemon's reason and ``e.errno`` is None;
    for a failure of the connection, ``e.errno`` is the system's error number.
    """


def default_socket(job="default"):
    """The control socket a peer of JOB opens by default (as gossipctl)."""
    return "/tmp/gossipd-%d/%s.sock" % (os.getuid(), job)


class _Connection:
    """One control connection: a JSON line out, a JSON line back."""

    def __init__(self, path, timeout):
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        # Bytes read past the end of the last reply line.
        self._pending = b""
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            hint = ""
            if e.errno in (errno.ENOENT, errno.ECONNREFUSED):
                hint = " (is a gossipd peer with --trainer external running there?)"
            raise AttachError(_errno(e), "cannot connect to %s: %s%s" %
                              (path, e.strerror or e, hint)) from None

    def close(self):
        self._sock.close()

    def request(self, cmd, want_fd=False, **fields):
        """Sends {"cmd": CMD, **fields} and returns the reply, without "ok";
        with want_fd, returns (reply, fd) where fd is the descriptor that came
        with it (or None). Raises AttachError on a refusal (errno None), and
        AttachError (with an errno) or OSError when the connection fails."""
        fields = dict(cmd=cmd, **fields)
        self._sock.sendall(json.dumps(fields, separators=(",", ":")).encode() + b"\n")
        fds = []
        try:
            line = self._read_line(fds if want_fd else None)
            try:
                reply = json.loads(line)
            except ValueError:
                raise AttachError(errno.EPROTO, "%s: reply to %s is not JSON: %r" %
                                  (self.path, cmd, line[:200])) from None
            if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
                raise AttachError(errno.EPROTO, "%s: malformed reply to %s: %r" %
                                  (self.path, cmd, line[:200]))
            if not reply.pop("ok"):
                raise AttachError("gossipd refused %s: %s" %
                                  (cmd, reply.get("error", "no reason given")))
            if len(fds) > 1:
                raise AttachError(errno.EPROTO, "%s: %d descriptors came with the reply to %s" %
                                  (self.path, len(fds), cmd))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        if want_fd:
            return reply, (fds[0] if fds else None)
        return reply

    def _read_line(self, fds):
        """The next reply line. With a list FDS, reads with recvmsg and adds
        the descriptors that arrive to it: the kernel hands them over with
        the first bytes of the message they were sent with."""
        while b"\n" not in self._pending:
            if len(self._pending) >= MAX_LINE:
                raise AttachError(errno.EPROTO, "%s: reply longer than %d bytes" %
                                  (self.path, MAX_LINE))
            if fds is None:
                data = self._sock.recv(MAX_LINE)
            else:
                data, got, flags, _ = socket.recv_fds(self._sock, MAX_LINE, 1)
                fds.extend(got)
                if flags & socket.MSG_CTRUNC:
                    raise AttachError(errno.EPROTO, "%s: a descriptor that came with a reply "
                                      "was cut off (too many, or too many files open here)" %
                                      self.path)
            if not data:
                raise AttachError(errno.ECONNRESET, "%s: gossipd closed the connection" %
                                  self.path)
            self._pending += data
        line, _, self._pending = self._pending.partition(b"\n")
        return line


def _errno(e):
    """The errno of the OSError E; a timeout has none of its own."""
    return errno.ETIMEDOUT if isinstance(e, TimeoutError) else e.errno or errno.EIO


def _shared_tensors(model, buffers, optimizer=None):
    """(name, tensor) for every tensor shared with the daemon, in the layout's
    order: the parameters, then (with BUFFERS) the floating-point buffers,
    then (with OPTIMIZER) each parameter's momentum buffer. Integer buffers
    (BatchNorm's num_batches_tracked) stay local."""
    for name, p in model.named_parameters():
        yield name, p
    if buffers:
        for name, b in model.named_buffers():
            if b.is_floating_point():
                yield name, b
    if optimizer is not None:
        for name, p in model.named_parameters():
            yield name + ".momentum_buffer", optimizer.state[p]["momentum_buffer"]


# The most ranges a step may name (attach_report.h's ATTACH_REPORT_MAX_WHOLE).
_MAX_WHOLE = 2048


def _vector_ranges(tensors):
    """[offset, count] of the tensors of at most one dimension among TENSORS
    ((name, tensor) in the shared layout's order), adjacent ones merged;
    none where there are more ranges than the daemon takes."""
    ranges, offset = [], 0
    for _, t in tensors:
        n = t.numel()
        if t.dim() <= 1 and n > 0:
            if ranges and ranges[-1][0] + ranges[-1][1] == offset:
                ranges[-1][1] += n
            else:
                ranges.append([offset, n])
        offset += n
    return ranges if len(ranges) <= _MAX_WHOLE else []


def _momentum_buffers(model, optimizer):
    """Gives each parameter of MODEL a momentum buffer in OPTIMIZER's state (a
    torch.optim.SGD with momentum, which makes them only at its first step
    otherwise, and then updates them in place), so they can be shared."""
    import torch

    if not isinstance(optimizer, torch.optim.SGD) or not all(
            g.get("momentum", 0) > 0 for g in optimizer.param_groups):
        raise AttachError("optimizer=: only torch.optim.SGD with momentum > 0 shares its "
                          "state (its momentum buffers)")
    mine = set(id(p) for g in optimizer.param_groups for p in g["params"])
    for name, p in model.named_parameters():
        if id(p) not in mine:
            raise AttachError("optimizer=: %s is not among the optimizer's parameters" % name)
        state = optimizer.state[p]
        if state.get("momentum_buffer") is None:
            state["momentum_buffer"] = torch.zeros_like(p)


# torch.optim's classes by the kind gossipd's optimizer key names: an
# adaptive one divides a step by the gradient's running size (gossipd(8),
# SHARE). Names this torch lacks are skipped.
_OPTIMIZER_KINDS = (
    ("adaptive", ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adadelta", "Adagrad",
                  "RMSprop", "SparseAdam")),
    ("sgd", ("SGD",)),
)


def _optimizer_kind(model, optimizer=None):
    """The kind ("sgd" or "adaptive") of the optimizer that steps the
    model's parameters: optimizer if given, else those alive in the
    process; None for none, for several of different kinds, or for a class
    of no known kind."""
    import gc
    import torch

    mine = set(id(p) for p in model.parameters())
    found = [optimizer] if optimizer is not None else [
        # type(), not isinstance: that would ask some lazy objects their
        # __class__, and one of torch's warns when asked
        o for o in gc.get_objects() if issubclass(type(o), torch.optim.Optimizer)]
    kinds = set()
    for o in found:
        if not any(id(p) in mine for g in o.param_groups for p in g["params"]):
            continue
        kinds.add(next((kind for kind, names in _OPTIMIZER_KINDS
                        if isinstance(o, tuple(getattr(torch.optim, n) for n in names
                                               if hasattr(torch.optim, n)))), None))
    return kinds.pop() if len(kinds) == 1 else None


def _digest(tensors):
    """BLAKE2b-256 of the tensors' values as float32 in host order, laid end
    to end as in the shared memory: what a fresh peer's vector would hold.
    A start agreement (gossipd(8), START) skips the pull when the member
    that started the job started from the same values."""
    h = hashlib.blake2b(digest_size=32)
    for _, t in tensors:
        h.update(t.detach().cpu().contiguous().numpy())
    return h.hexdigest()


def _number(v):
    """V (an int, a float, a one-element tensor) as a JSON number, or None for
    a value JSON cannot carry (NaN, inf)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    v = float(v)
    return v if math.isfinite(v) else None


class Peer:
    """A training process's attachment to its gossipd peer; see attach().

    Attributes: params, the number of float32 values shared; fresh, whether
    the peer held no model of the job at attach; step_count, the job's
    optimizer steps (the attach reply's step, plus one per step()); mixes,
    the mixes the daemon has applied at this process's step boundaries;
    stopped, whether the peer has said it leaves.
    """

    def __init__(self, model, socket=None, job="default", buffers=False, name=None,
                 timeout=DEFAULT_TIMEOUT, optimizer=None, evaluate="job", whole_vectors=True):
        import torch

        if evaluate not in ("job", "own"):
            raise ValueError("evaluate=%r: want \"job\" or \"own\"" % (evaluate,))
        self._model = model
        self._evaluating = None
        self._hook = None
        self._buffers = buffers
        self._optimizer = optimizer
        if optimizer is not None:
            _momentum_buffers(model, optimizer)
        tensors = list(_shared_tensors(model, buffers, optimizer))
        if not tensors:
            raise AttachError("the model has no parameters to share")
        device = tensors[0][1].device
        for n, t in tensors:
            if t.dtype != torch.float32:
                raise AttachError("%s is %s: gossipd shares float32 only (model.float())" %
                                  (n, t.dtype))
            if t.device != device:
                raise AttachError("%s is on %s, %s on %s: all of them must be on one device" %
                                  (n, t.device, tensors[0][0], device))
        if device.type not in ("cpu", "cuda"):
            raise AttachError("the model is on %s: gossipd shares CPU or CUDA tensors" % device)
        self._cuda = device.type == "cuda"
        self.params = sum(t.numel() for _, t in tensors)
        self.stopped = False
        self.mixes = 0

        self._conn = _Connection(socket or default_socket(job), timeout)
        try:
            req = dict(version=PROTOCOL_VERSION, params=self.params, dtype="float32",
                       digest=_digest(tensors))
            if name is not None:
                req["name"] = name
            reply, fd = self._request("attach", want_fd=True, **req)
            self._map(reply, fd)
            self.fresh = reply["fresh"]
            self.step_count = reply["step"]

            # Lay the tensors over the shared memory, one view each.
            self._views = []
            offset = 0
            for _, t in tensors:
                n = t.numel()
                self._views.append(self._flat[offset:offset + n].view(t.shape))
                offset += n
            with torch.no_grad():
                for (_, t), v in zip(tensors, self._views):
                    if self.fresh:
                        v.copy_(t)          # the model's values become the peer's
                    elif self._cuda:
                        t.copy_(v)          # the job's values become the model's
                    if not self._cuda:
                        t.data = v
            # What step() checks: the tensors the model holds then, and for a
            # CPU model that each one still lives at its view's address.
            self._expect = [v.data_ptr() for v in self._views]
            self._shapes = [t.shape for _, t in tensors]
            self._device = device

            # The first boundary: from it on the peer takes part in exchanges.
            # An optimizer made after attach is looked for at the first step.
            self._optimizer_kind = _optimizer_kind(model, optimizer)
            self._optimizer_looked = self._optimizer_kind is not None
            self._boundary(self.step_count, stage_out=False, optimizer=self._optimizer_kind,
                           whole=_vector_ranges(tensors) if whole_vectors else [])
            if evaluate == "job":
                self._hook = model.register_forward_pre_hook(self._forward_pre)
        except BaseException:
            self._drop()
            raise

    def _map(self, reply, fd):
        """Maps the descriptor of the attach reply as one flat float32 tensor."""
        import torch

        if fd is None:
            raise AttachError(errno.EPROTO, "no memory descriptor came with the attach reply")
        try:
            size = 4 * self.params
            if (reply.get("params") != self.params or reply.get("bytes") != size
                    or reply.get("dtype") != "float32"
                    or reply.get("version") != PROTOCOL_VERSION
                    or not isinstance(reply.get("step"), int)
                    or not isinstance(reply.get("fresh"), bool)):
                raise AttachError(errno.EPROTO, "attach reply does not match the request "
                                  "(%d float32 parameters): %r" % (self.params, reply))
            # A file shorter than the mapping would fault on first touch.
            if os.fstat(fd).st_size != size:
                raise AttachError(errno.EPROTO, "the shared memory is %d bytes, not %d" %
                                  (os.fstat(fd).st_size, size))
            mem = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        # The tensor holds a reference to the mmap object, and so does every
        # view of it: the memory is unmapped only when the last tensor over it
        # is gone. It is never closed explicitly, as that would unmap it under
        # live tensors.
        self._flat = torch.frombuffer(mem, dtype=torch.float32)

    def _current(self):
        """The tensors the model shares now (as at attach, unless changed)."""
        tensors = [t for _, t in _shared_tensors(self._model, self._buffers, self._optimizer)]
        if len(tensors) != len(self._views):
            raise AttachError("the model has %d shared tensors, %d at attach: attach again "
                              "after changing the model" % (len(tensors), len(self._views)))
        return tensors

    def _moved(self, i):
        """The error for the model's I-th shared tensor having moved."""
        name = list(_shared_tensors(self._model, self._buffers, self._optimizer))[i][0]
        return AttachError("%s is not the tensor attached any more (replaced by .to(), "
                           ".double(), `param.data = ...` or a new submodule?), so it no "
                           "longer shares gossipd's memory: attach again after changing "
                           "the model" % name)

    def _hand_over(self, stage_out=True):
        """Checks that the model still shares the memory and, for a CUDA
        model, stages its parameters out to it; returns its tensors."""
        import torch

        self._check_open()
        tensors = self._current()
        if self._cuda:
            for i, t in enumerate(tensors):
                if t.device != self._device or t.shape != self._shapes[i]:
                    raise self._moved(i)
            if stage_out:
                with torch.no_grad():
                    # Copies to pageable host memory return once done.
                    for t, v in zip(tensors, self._views):
                        v.copy_(t)
        else:
            for i, t in enumerate(tensors):
                if t.data_ptr() != self._expect[i]:
                    raise self._moved(i)
        return tensors

    def _take_back(self, tensors, changed):
        """After a reply that CHANGED the memory, a CUDA model reads it back."""
        import torch

        if self._cuda and changed:
            with torch.no_grad():
                for t, v in zip(tensors, self._views):
                    t.copy_(v)

    def _own_back(self):
        """The own model back after an evaluation of the job's."""
        if self._evaluating == "job":
            reply = self._request("train")
            self._take_back(self._current(), reply.get("restored", False))
        self._evaluating = None

    def _forward_pre(self, module, args):
        """Before each forward of the model: the first in eval mode puts the
        job's model in place of this process's own (the daemon keeps the
        own), the first back in training mode puts the own back."""
        if self._conn is None or self.stopped:
            return
        if module.training:
            self._own_back()
        elif self._evaluating is None:
            tensors = self._hand_over()
            reply = self._request("evaluate")
            self.mixes += reply.get("mixed", 0)
            job = bool(reply.get("job_model"))
            self._take_back(tensors, job or reply.get("mixed", 0) > 0)
            self._evaluating = "job" if job else "own"

    def _boundary(self, n, stage_out=True, optimizer=None, whole=None, **numbers):
        """Sends step N (with the optimizer's kind, the ranges to go whole and
        the optional numbers that are set) and returns the reply; for a CUDA
        model, stages the parameters through the host memory around it."""
        tensors = self._hand_over(stage_out)
        fields = {k: _number(v) for k, v in numbers.items() if v is not None}
        if optimizer is not None:
            fields["optimizer"] = optimizer
        if whole is not None:
            fields["whole"] = whole
        reply = self._request("step", step=n,
                              **{k: v for k, v in fields.items() if v is not None})
        self.mixes += reply.get("mixed", 0)
        self._take_back(tensors, reply.get("mixed", 0) > 0)
        if reply.get("stop"):
            self.stopped = True
        self.step_count = n
        return reply

    def step(self, loss=None, samples=None, epoch=None, accuracy=None, test_loss=None):
        """A step boundary, after the optimizer's step: hands the memory to
        the daemon, which applies the mixes that came in meanwhile, and waits
        for it to hand it back. The optional numbers appear in the peer's
        status, watch and metrics: loss (recent training loss), samples
        (training samples since the previous call), epoch, and after an
        evaluation accuracy and test_loss.

        Returns False once the peer is leaving (gossipctl leave, a signal):
        the training loop should end. Raises AttachError on a refusal, a lost
        connection, or parameters that no longer live in the shared memory.
        """
        if self.stopped:
            return False
        # Back in training mode after an evaluation (model.train() with no
        # forward yet): the own model first. Still in eval mode, the
        # process trained on the job's model, which the step keeps.
        if self._model.training:
            self._own_back()
        kind = None
        if not self._optimizer_looked:
            self._optimizer_looked = True
            kind = _optimizer_kind(self._model, self._optimizer)
        self._boundary(self.step_count + 1, optimizer=kind, loss=loss, samples=samples,
                       epoch=epoch, accuracy=accuracy, test_loss=test_loss)
        return not self.stopped

    def status(self):
        """The peer's status (as `gossipctl --json status`), a dict."""
        return self._request("status")

    def leave(self):
        """Asks the peer to leave the job: its next step reply says stop."""
        return self._request("leave")

    def _request(self, cmd, want_fd=False, **fields):
        """One request on the attachment (see _Connection.request). A refusal
        leaves it as it was; a failed connection (a timeout, a reset,
        garbage) ends it, since the daemon then counts this process as gone."""
        self._check_open()
        try:
            return self._conn.request(cmd, want_fd=want_fd, **fields)
        except AttachError as e:
            if e.errno is not None:
                self._drop()
            raise
        except OSError as e:
            self._drop()
            if isinstance(e, TimeoutError):
                why = "no reply within the timeout; the connection is closed"
            else:
                why = "connection to gossipd lost: %s" % (e.strerror or e)
            raise AttachError(_errno(e), "%s: %s" % (cmd, why)) from None

    def close(self):
        """Detaches: the model keeps its current values in memory of its own,
        and the daemon keeps the shared memory. Harmless if the daemon has
        already gone (it left the job) or close was called before."""
        if self._conn is None:
            return
        self._drop(detach=True)

    def _drop(self, detach=False):
        """Ends the attachment: copies the model out of the shared memory
        (while it is still this process's: before the detach request), then
        detaches and closes the connection."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        flat = getattr(self, "_flat", None)
        if flat is not None and not self._cuda:
            lo, hi = flat.data_ptr(), flat.data_ptr() + 4 * flat.numel()
            for _, t in _shared_tensors(self._model, self._buffers, self._optimizer):
                if lo <= t.data_ptr() < hi:
                    t.data = t.data.clone()
        self._flat = None
        self._views = []
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if detach:
            try:
                conn.request("detach")
            except AttachError as e:
                if e.errno is None:
                    raise
            except OSError:
                pass    # the connection's end detaches as well
            finally:
                conn.close()
        else:
            conn.close()

    def _check_open(self):
        if self._conn is None:
            raise AttachError(errno.ENOTCONN, "the peer is closed (or its connection was lost)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def attach(model, socket=None, job="default", buffers=False, name=None,
           timeout=DEFAULT_TIMEOUT, optimizer=None, evaluate="job", whole_vectors=True):
    """Attaches MODEL (a torch.nn.Module with float32 parameters) to the
    gossipd peer whose control socket is SOCKET (default: JOB's default
    socket, as gossipctl's) and returns the Peer.

    The parameters, in the order of model.parameters(), then with BUFFERS its
    floating-point buffers, and with OPTIMIZER (a torch.optim.SGD with
    momentum) each parameter's momentum buffer, become views of the memory
    the daemon shares: the daemon then averages momentum with the
    parameters, on the same coordinates.
    EVALUATE "job" (the default) makes what the model computes in eval mode
    the job's model where the daemon's mode has one (see Evaluation above);
    "own" leaves this process's own model in place.
    WHOLE_VECTORS (the default) asks mode share to send the shared tensors
    of at most one dimension whole in every share (see above).
    NAME is shown in the peer's status. TIMEOUT bounds each wait for a reply
    (seconds; None waits for ever). A joining peer (gossipd --join) answers
    once it has pulled the job's model from its donors: attach waits for
    that, then starts from the donors' model and step. Raises AttachError
    when the daemon refuses (another process is attached, the sizes differ
    from the job's, the peer is leaving) or cannot be reached.
    """
    return Peer(model, socket=socket, job=job, buffers=buffers, name=name, timeout=timeout,
                optimizer=optimizer, evaluate=evaluate, whole_vectors=whole_vectors)
