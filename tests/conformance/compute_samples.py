"""The reference's API sample tests, replayed against Novella's Compute API.

The installed ``nova`` package (a test-only dependency) ships its API sample
templates (``api_samples/**/*.json.tpl``) and the test modules that bind
each template to a request (``api_sample_tests/test_*.py``): which method,
URL, microversion and request template, which substitutions, which status.
Nothing of it is copied here. The test modules are executed as they are,
each in a namespace of its own, with every ``nova`` module they import
replaced: their base class (``ApiSampleTestBaseV21``) is :class:`SampleTest`
below, whose ``_do_get/_do_post/_do_put/_do_delete`` send the request to a
Novella all-in-one (in process, through its WSGI application) and whose
``_verify_response`` matches the answer with the template as the
reference's ``api_samples_test_base`` does (placeholders are regular
expressions substituted by name). What a test reaches inside the reference
(``stub_out``, ``mock.patch`` of a ``nova`` target, fixtures, objects) does
nothing and is recorded: the reference's environment is faked there, and
Novella is only ever driven through its HTTP API.

A run of one reference test gives a :class:`Run`: every template checked,
with the request it belongs to, and every difference found, each with a
stable name (``status``, ``missing <path>``, ``extra <path>``,
``value <path>``, ``items <path>``, ``body``, ``error``) that the
known-difference table of docs/conformance.md refers to.
"""
import ast
import builtins
import contextlib
import functools
import importlib.util
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import traceback
import types
import unittest
from unittest import mock as real_mock
from urllib import parse as urlparse

import webob

REFERENCE_PACKAGE = "nova.tests.functional.api_sample_tests"
PROJECT_ID = "6f70656e737461636b20342065766572"
HOST = "http://openstack.example.com"
GLANCE_HOST = "http://glance.openstack.example.com"

# The reference's first compute service (integrated_helpers) and its fake
# driver's node and sizes, which the templates show literally.
FIRST_COMPUTE = "compute"
FIRST_NODE = "fake-mini"
FAKE_DRIVER = {"vcpus": 2, "memory_mb": 8192, "local_gb": 1028}


# ---------------------------------------------------------------------------
# Where the reference is
# ---------------------------------------------------------------------------

def nova_root():
    spec = importlib.util.find_spec("nova")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def tests_dir():
    root = nova_root()
    path = root and root / "tests" / "functional" / "api_sample_tests"
    return path if path and path.is_dir() else None


def templates_dir():
    base = tests_dir()
    return base / "api_samples" if base else None


def nova_version():
    from importlib import metadata
    try:
        return metadata.version("nova")
    except metadata.PackageNotFoundError:
        return None


def template_id(path):
    """``servers/v2.47/server-get-resp`` for its ``.json.tpl`` file."""
    rel = pathlib.Path(path).relative_to(templates_dir()).as_posix()
    return rel[:-len(".json.tpl")]


def all_templates():
    base = templates_dir()
    return sorted(template_id(p) for p in base.rglob("*.json.tpl")) if base else []


def test_modules():
    base = tests_dir()
    return sorted(p.stem for p in base.glob("test_*.py")) if base else []


@functools.lru_cache(maxsize=None)
def _module_constants(relpath):
    """{(class name, attribute): value} of the string constants that class
    bodies of a reference module assign, and the ``id`` of the dicts they
    assign (the fixtures' fixed volume and image ids)."""
    path = nova_root() / relpath
    out = {}
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                continue
            name, value = stmt.targets[0].id, stmt.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out[(node.name, name)] = value.value
            elif isinstance(value, ast.Dict):
                fields = {k.value: v.value for k, v in zip(value.keys, value.values)
                          if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                props = next((v for k, v in zip(value.keys, value.values)
                              if isinstance(k, ast.Constant) and k.value == "properties"
                              and isinstance(v, ast.Dict)), None)
                if props is not None:
                    fields["properties"] = {k.value: _constant(v)
                                            for k, v in zip(props.keys, props.values)
                                            if isinstance(k, ast.Constant)}
                if isinstance(fields.get("id"), str):
                    out[(node.name, name)] = fields
    return out


def _constant(node):
    """A constant's value; a named enum member of the reference's fields
    (``obj_fields.Architecture.X86_64``) is its name in lower case, its value."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    return None


def cinder_volumes():
    """The CinderFixture's fixed volume ids, by attribute name."""
    return {attr: value for (cls, attr), value in
            _module_constants("tests/fixtures/cinder.py").items()
            if cls == "CinderFixture" and isinstance(value, str)
            and re.fullmatch(r"[0-9a-f-]{36}", value)}


def neutron_networks():
    """The NeutronFixture's networks ({attribute: {id, name, ...}})."""
    return {attr: value for (cls, attr), value in
            _module_constants("tests/fixtures/neutron.py").items()
            if cls == "NeutronFixture" and attr.startswith("network_")
            and isinstance(value, dict)}


def glance_images():
    """The GlanceFixture's images ({attribute: {id, name, ...}})."""
    return {attr: value for (cls, attr), value in
            _module_constants("tests/fixtures/glance.py").items()
            if cls == "GlanceFixture" and isinstance(value, dict)}


@functools.lru_cache(maxsize=None)
def reference_max_version():
    text = (nova_root() / "api" / "openstack" / "api_version_request.py").read_text()
    return re.search(r"^_MAX_API_VERSION = '([0-9.]+)'", text, re.M).group(1)


def version_tuple(text):
    if text in (None, ""):
        return (2, 1)
    if text == "latest":
        return (99, 99)
    major, minor = text.split(".")
    return int(major), int(minor)


# ---------------------------------------------------------------------------
# Stand-ins for what the test modules import from the reference
# ---------------------------------------------------------------------------

_CURRENT = []  # the Run being recorded (a stack of one)


def _note(what):
    if _CURRENT:
        _CURRENT[-1].note_internal(what)


class _StubBase:
    """What a class deriving from a reference-internal class derives from."""

    def __init__(self, *args, **kwargs):
        pass


class Internal:
    """Anything inside the reference a test module reaches for: attributes,
    calls, context managers and iteration all work and do nothing; each call
    is recorded on the current run, as an environment Novella does not get."""

    def __init__(self, path, args=(), kwargs=None):
        self._path = path
        self._args, self._kwargs = args, kwargs or {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _resolve_internal(f"{self._path}.{name}")

    def __call__(self, *args, **kwargs):
        _note(self._path)
        return Internal(self._path + "()", args, kwargs)

    def __getitem__(self, key):
        return Internal(f"{self._path}[{key!r}]")

    def __setitem__(self, key, value):
        pass

    def __enter__(self):
        _note(self._path)
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return True

    def __mro_entries__(self, bases):
        return (_StubBase,)

    def __repr__(self):
        return f"<reference {self._path}>"


def _resolve_internal(path):
    """The fixtures' fixed ids are real strings (the volumes and images a
    test names); everything else is an :class:`Internal`."""
    match = re.fullmatch(r"nova\.tests\.fixtures(?:\.cinder)?\.CinderFixture\.(\w+)", path)
    if match and match.group(1) in cinder_volumes():
        return cinder_volumes()[match.group(1)]
    return Internal(path)


def _module_file(dotted):
    """The file of a module (or package) of the reference, or None."""
    parts = dotted.split(".")
    if parts[0] != "nova" or nova_root() is None:
        return None
    path = nova_root().joinpath(*parts[1:])
    if path.is_dir() and (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


@functools.lru_cache(maxsize=None)
def _top_level_constants(dotted):
    """{name: value} of a reference module's top-level literal assignments."""
    path = _module_file(dotted)
    if path is None:
        return {}
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


class _Namespace(types.SimpleNamespace):
    pass


class _StubModule(types.ModuleType):
    """A reference module that is not loaded: its attributes are the stand-ins
    the loader knows (test modules, the harness) or :class:`Internal`."""

    def __init__(self, name, loader):
        super().__init__(name)
        self.__path__ = []
        self._loader = loader

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._loader.resolve(f"{self.__name__}.{attr}")

    def __repr__(self):
        return f"<reference module {self.__name__}>"


class _InternalMock(real_mock.MagicMock):
    """What a patch of the reference's code hands the test: its assertions
    about calls inside the reference hold (nothing of the reference runs)."""

    def _noted(self, *args, **kwargs):
        _note("assertion on a mock of the reference")

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "return_value" and _CURRENT_TEST:
            hook = PATCH_EQUIVALENTS.get(self.__dict__.get("_novella_target"))
            if hook is not None:
                hook(_CURRENT_TEST[-1], value)

    assert_called = assert_called_once = assert_called_with = _noted
    assert_called_once_with = assert_any_call = assert_has_calls = _noted
    assert_not_called = _noted


def _internal_mock(target):
    mock = _InternalMock()
    mock.__dict__["_novella_target"] = target
    return mock


class _ConfProxy:
    """``nova.conf.CONF``: ``set_override`` is a ``self.flags`` of the running test."""

    def set_override(self, name, value, group=None):
        if _CURRENT_TEST:
            _CURRENT_TEST[-1].flags(**{name: value, "group": group})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Internal(f"nova.conf.CONF.{name}")


_CURRENT_TEST = []


class _FakePatch:
    """``mock.patch`` of a target inside the reference: recorded, not applied.
    As a decorator it passes a MagicMock where the real one would."""

    def __init__(self, target, new_given):
        self.target = target
        self.new_given = new_given

    def __call__(self, func):
        if isinstance(func, type):
            return func
        patchings = getattr(func, "_fake_patchings", None)
        if patchings is not None:  # mock's order: the innermost patch's mock first
            patchings.append(self)
            return func

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            extra = []
            for patch in wrapper._fake_patchings:
                _note("mock.patch " + patch.target)
                if not patch.new_given:
                    extra.append(_internal_mock(patch.target))
            return func(*args, *extra, **kwargs)

        wrapper._fake_patchings = [self]
        return wrapper

    def __enter__(self):
        _note("mock.patch " + self.target)
        return _internal_mock(self.target)

    def __exit__(self, *exc):
        return False

    def start(self):
        return self.__enter__()

    def stop(self):
        pass


def _fake_patch(target, new=real_mock.DEFAULT, *args, **kwargs):
    return _FakePatch(str(target), new is not real_mock.DEFAULT)


def _fake_patch_object(target, attribute, new=real_mock.DEFAULT, *args, **kwargs):
    return _FakePatch(f"{getattr(target, '_path', target)}.{attribute}",
                      new is not real_mock.DEFAULT)


_fake_patch.object = _fake_patch_object
_fake_patch.dict = lambda target, *a, **k: _FakePatch(f"dict {target}", True)
_fake_patch.multiple = lambda target, *a, **k: _FakePatch(f"multiple {target}", True)


class _FakeMockModule(types.ModuleType):
    def __init__(self):
        super().__init__("unittest.mock")
        self.patch = _fake_patch

    def __getattr__(self, name):
        return getattr(real_mock, name)


def _mini_ddt():
    """``ddt``: data-driven test methods, as the reference's versions tests use."""
    module = types.ModuleType("ddt")

    def data(*values):
        def mark(func):
            func._ddt_data = values
            return func
        return mark

    def unpack(func):
        func._ddt_unpack = True
        return func

    def ddt(cls):
        for name, func in list(vars(cls).items()):
            values = getattr(func, "_ddt_data", None)
            if values is None:
                continue
            for index, value in enumerate(values, start=1):
                suffix = re.sub(r"\W", "_", str(value)).strip("_")

                def method(self, _func=func, _value=value):
                    if getattr(_func, "_ddt_unpack", False):
                        return _func(self, *_value)
                    return _func(self, _value)
                setattr(cls, f"{name}_{index}_{suffix}" if suffix else f"{name}_{index}", method)
            delattr(cls, name)
        return cls

    module.ddt, module.data, module.unpack = ddt, data, unpack
    return module


class _APIVersionRequest:
    """The little of ``nova.api.openstack.api_version_request`` the tests use."""

    def __init__(self, text=None):
        self.version = version_tuple(text) if text else None

    def is_null(self):
        return self.version is None

    def matches(self, low, high):
        if low.is_null() and high.is_null():
            return True
        if high.is_null():
            return low.version <= self.version
        if low.is_null():
            return self.version <= high.version
        return low.version <= self.version <= high.version

    def get_string(self):
        return "%d.%d" % self.version


class ReferenceLoader:
    """Executes the reference's sample test modules, each with an
    ``__import__`` of its own: ``nova`` and the libraries of its test
    framework come from here, never from the installed packages."""

    # Top-level packages imported for real (pure libraries, no side effects).
    REAL = {"oslo_utils", "oslo_serialization", "openstack"}

    def __init__(self):
        self.modules = {}
        harness = _Namespace(ApiSampleTestBaseV21=SampleTest, ApiSampleTestBase=SampleTest,
                             PROJECT_ID=PROJECT_ID, pretty_data=pretty_data,
                             objectify=objectify, NoMatch=NoMatch)
        client = _Namespace(OpenStackApiException=OpenStackApiException,
                            OpenStackApiNotFoundException=OpenStackApiNotFoundException,
                            TestOpenStackClient=Client, APIResponse=APIResponse)
        avr = _Namespace(APIVersionRequest=_APIVersionRequest,
                         max_api_version=lambda: _APIVersionRequest(reference_max_version()),
                         min_api_version=lambda: _APIVersionRequest("2.1"))
        self.virtual = {
            REFERENCE_PACKAGE + ".api_sample_base": harness,
            "nova.tests.functional.api_samples_test_base": harness,
            "nova.tests.functional.api.client": client,
            "nova.api.openstack.api_version_request": avr,
            "nova.conf.CONF": _ConfProxy(),
        }
        self.stubs = {}
        self.mock = _FakeMockModule()
        self.ddt = _mini_ddt()

    # Helper modules of the reference's tests that are plain data and code
    # (no nova imports): executed here like the test modules.
    EXECUTED = {"nova.tests.unit.fake_crypto"}

    def resolve(self, dotted):
        if dotted in self.virtual:
            return self.virtual[dotted]
        prefix = REFERENCE_PACKAGE + ".test_"
        if dotted.startswith(prefix) and "." not in dotted[len(REFERENCE_PACKAGE) + 1:]:
            return self.module(dotted.rsplit(".", 1)[1])
        if dotted in self.EXECUTED:
            return self.module(dotted)
        if _module_file(dotted) is not None:
            if dotted not in self.stubs:
                self.stubs[dotted] = _StubModule(dotted, self)
            return self.stubs[dotted]
        module, _, attr = dotted.rpartition(".")
        if module in self.EXECUTED:
            return getattr(self.module(module), attr)
        constants = _top_level_constants(module)
        if attr in constants:
            return constants[attr]
        return _resolve_internal(dotted)

    def module(self, name):
        """A reference module executed here: ``api_sample_tests/<name>.py``
        for a bare name, else the module of that dotted name."""
        if name in self.modules:
            return self.modules[name]
        if "." in name:
            path, full = _module_file(name), name
        else:
            path, full = tests_dir() / (name + ".py"), f"{REFERENCE_PACKAGE}.{name}"
        module = types.ModuleType(full)
        module.__file__ = str(path)
        own_builtins = dict(builtins.__dict__)
        own_builtins["__import__"] = self._import
        module.__dict__["__builtins__"] = own_builtins
        self.modules[name] = module
        try:
            exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
        except BaseException:
            del self.modules[name]
            raise
        if "." not in name:
            _install_equivalents(name, module)
        return module

    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):
        top = name.split(".")[0]
        if name == "unittest.mock" or (name == "unittest" and fromlist and "mock" in fromlist):
            if name == "unittest":
                return _Namespace(mock=self.mock)
            return self.mock if fromlist else _Namespace(mock=self.mock)
        if top == "ddt":
            return self.ddt
        if top in sys.stdlib_module_names or top in self.REAL:
            return builtins.__import__(name, globals, locals, fromlist, level)
        if fromlist:
            return self.resolve(name)
        return self.resolve(top)


def load_module(loader, name):
    """(module, None) or (None, the error) for a reference test module."""
    try:
        return loader.module(name), None
    except Exception as exc:  # noqa: BLE001 - reported as the module's failure
        return None, "%s: %s" % (type(exc).__name__, exc)


def test_cases(module):
    """[(class name, method name)] of a reference test module, as unittest's
    loader would find them (the classes it defines, with inherited methods)."""
    out = []
    for name, cls in vars(module).items():
        if not (isinstance(cls, type) and issubclass(cls, SampleTest)
                and cls.__module__ == module.__name__):
            continue
        for method in sorted(unittest.TestLoader().getTestCaseNames(cls)):
            out.append((name, method))
    return out


def is_empty(cls, method_name):
    """Whether a reference test method does nothing (its body ``pass``: the
    reference leaves some inherited tests out that way)."""
    import inspect
    import textwrap
    func = inspect.unwrap(getattr(cls, method_name))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body) and all(isinstance(node, ast.Pass) for node in body)


def pick_scenario(cls):
    """The scenario replayed: API v2.1 with the project id in URLs (the
    reference also runs its classes on /v2 and without a project id, with
    the same templates)."""
    scenarios = getattr(cls, "scenarios", None) or []
    for name, attrs in scenarios:
        if attrs.get("api_major_version") == "v2.1" and attrs.get("USE_PROJECT_ID", True):
            return name, attrs
    if scenarios:
        return scenarios[0]
    return None, {}


# ---------------------------------------------------------------------------
# Matching a response with a template, as api_samples_test_base does
# ---------------------------------------------------------------------------

class NoMatch(Exception):
    pass


def pretty_data(data):
    if isinstance(data, bytes):
        data = data.decode()
    data = json.dumps(json.loads(data), sort_keys=True, indent=4)
    return "\n".join(line.rstrip() for line in data.split("\n")).strip()


def objectify(data):
    """JSON of a template whose unquoted placeholders (``"id": %(x)s,``)
    become ``"%(int:x)s"`` strings, as the reference reads them."""
    if not data:
        return {}
    data = re.sub(r'(\: )%\((.+)\)s([^"])', r'\1"%(int:\2)s"\3', data)
    return json.loads(data)


def base_regexes(compute_host):
    """The reference's always-available substitutions (``_get_regexes``)."""
    text = r'(\\"|[^"])*'
    return {
        "isotime": r"\d{4}-[0,1]\d-[0-3]\dT\d{2}:\d{2}:\d{2}Z",
        "strtime": r"\d{4}-[0,1]\d-[0-3]\dT\d{2}:\d{2}:\d{2}\.\d{6}",
        "strtime_url": r"\d{4}-[0,1]\d-[0-3]\d\+\d{2}\%3A\d{2}\%3A\d{2}\.\d{6}",
        "strtime_or_none": r"None|\d{4}-[0,1]\d-[0-3]\dT\d{2}:\d{2}:\d{2}\.\d{6}",
        "xmltime": r"\d{4}-[0,1]\d-[0-3]\d \d{2}:\d{2}:\d{2}(\.\d{6})?(\+00:00)?",
        "password": "[0-9a-zA-Z]{1,12}",
        "ip": "[0-9]{1,3}.[0-9]{1,3}.[0-9]{1,3}.[0-9]{1,3}",
        "ip6": "([0-9a-zA-Z]{1,4}:){1,7}:?[0-9a-zA-Z]{1,4}",
        "id": "(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
        "uuid": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "request_id": "req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "reservation_id": "r-[0-9a-zA-Z]{8}",
        "private_key": "(-----BEGIN RSA PRIVATE KEY-----|)[a-zA-Z0-9\n/+=]*"
                       "(-----END RSA PRIVATE KEY-----|)",
        "public_key": "(ssh-rsa|-----BEGIN CERTIFICATE-----)[ a-zA-Z0-9\n/+=]*"
                      "(Generated-by-Nova|-----END CERTIFICATE-----)",
        "fingerprint": "(([0-9a-f]{2}:){19}|([0-9a-f]{2}:){15})[0-9a-f]{2}",
        "keypair_type": "ssh|x509",
        "host": HOST,
        "host_name": r"\w+",
        "glance_host": GLANCE_HOST,
        "compute_host": compute_host,
        "text": text,
        "int": "[0-9]+",
        "user_id": text,
        "api_vers": "v2.1",
        "compute_endpoint": f"{HOST}/{PROJECT_ID}",
        "versioned_compute_endpoint": f"{HOST}/v2.1/{PROJECT_ID}",
    }


class Matcher:
    """``_compare_result`` of the reference, collecting every difference
    instead of stopping at the first. A difference is (name, message); the
    value returned is the one the reference's comparison returns (the match
    of the ``id`` group, or the first group, of the last placeholder
    matched), which tests use as the id of what they created."""

    def __init__(self, subs):
        self.subs = subs
        self.diffs = []

    def _diff(self, kind, path, message):
        self.diffs.append((f"{kind} {path or '.'}", message))

    def compare(self, expected, result, path=""):
        if expected is None:
            if result is not None and result != "":
                self._diff("value", path, f"expected null, got {result!r}")
            return None
        if isinstance(expected, dict):
            return self._dict(expected, result, path)
        if isinstance(expected, list):
            return self._list(expected, result, path)
        if isinstance(expected, str) and "%" in expected:
            return self._pattern(expected, result, path)
        if isinstance(expected, str):
            return self._string(expected, result, path)
        if isinstance(expected, (int, float)):
            if expected != result:
                self._diff("value", path, f"expected {expected!r}, got {result!r}")
            return None
        raise ValueError(f"unexpected template value type {type(expected)}")

    def _dict(self, expected, result, path):
        if not isinstance(result, dict):
            self._diff("value", path, f"expected an object, got {_short(result)}")
            return None
        matched = None
        for key in sorted(set(expected) - set(result)):
            self._diff("missing", _join(path, key), "in the template, not in the response")
        for key in sorted(set(result) - set(expected)):
            self._diff("extra", _join(path, key),
                       f"in the response ({_short(result[key])}), not in the template")
        for key in sorted(set(expected) & set(result)):
            value = self.compare(expected[key], result[key], _join(path, key))
            matched = value or matched
        return matched

    def _trial(self, expected, result):
        trial = Matcher(self.subs)
        value = trial.compare(expected, result)
        return not trial.diffs, value

    def _list(self, expected, result, path):
        if not isinstance(result, list):
            self._diff("value", path, f"expected a list, got {_short(result)}")
            return None
        item_path = path + "[]"
        if len(result) == len(expected) == 1:
            return self.compare(expected[0], result[0], item_path)
        remaining, extra, matched = list(expected), [], None
        for item in result:
            for index, candidate in enumerate(remaining):
                ok, value = self._trial(candidate, item)
                if ok:
                    matched = value
                    del remaining[index]
                    break
            else:
                extra.append(item)
        if len(remaining) == len(extra):
            # Unmatched items pair up in order: their own differences tell more.
            for candidate, item in zip(remaining, extra):
                value = self.compare(candidate, item, item_path)
                matched = value or matched
        else:
            self._diff("items", path,
                       f"{len(expected)} items in the template, {len(result)} in the response;"
                       f" unmatched template items {_short(remaining)},"
                       f" unmatched response items {_short(extra)}")
        return matched

    def _pattern(self, expected, result, path):
        template = expected
        for char in "[]<>?":
            expected = expected.replace(char, "\\" + char)
        if expected.startswith("%(int:"):
            result = str(result)
            expected = expected.replace("int:", "")
        try:
            expected = expected % self.subs
        except KeyError as exc:
            self._diff("value", path, f"no substitution for {exc} in {template!r}")
            return None
        try:
            match = re.match("^%s$" % expected, result)
        except TypeError:
            match = None
        except re.error as exc:
            self._diff("value", path, f"template {template!r} is no regular expression: {exc}")
            return None
        if not match:
            self._diff("value", path, f"template {template!r} (/{_clip(expected, 200)}/)"
                                      f" does not match {result!r}")
            return None
        try:
            return match.group("id")
        except IndexError:
            return match.groups()[0] if match.groups() else None

    def _string(self, expected, result, path):
        expected = expected.strip()
        if isinstance(result, str):
            result = result.strip()
        if expected == result:
            return None
        try:  # a JSON document in a string (a hypervisor's cpu_info)
            inner_expected, inner_result = objectify(expected), objectify(result)
        except (ValueError, TypeError):
            self._diff("value", path, f"expected {expected!r}, got {result!r}")
            return None
        return self.compare(inner_expected, inner_result, path)


def _join(path, key):
    return f"{path}.{key}" if path else str(key)


def _clip(text, limit=300):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _short(value, limit=300):
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return _clip(text, limit)


# ---------------------------------------------------------------------------
# A run of one reference test: what was checked, what differed
# ---------------------------------------------------------------------------

class Stop(Exception):
    """A check whose failure leaves nothing sensible to do after it."""


class Run:
    def __init__(self, test_id):
        self.test_id = test_id
        self.checks = []      # {"sample", "kind", "request", "diffs": [(name, message)]}
        self.internals = []   # what the reference test reached inside the reference
        self.last_request = None

    def note_internal(self, what):
        what = re.sub(r"\(\)$", "", str(what))
        if what not in self.internals:
            self.internals.append(what)

    def check(self, sample, kind, request, diffs):
        self.checks.append({"sample": sample, "kind": kind,
                            "request": request.describe() if request else None,
                            "diffs": list(diffs)})

    def error(self, exc):
        sample = self.last_request.sample if self.last_request else self.test_id
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if str(tests_dir() or "") in f.filename] if tests_dir() else []
        where = (" at %s:%d (%s)" % (pathlib.Path(frames[-1].filename).name, frames[-1].lineno,
                                      frames[-1].line) if frames else "")
        self.check(sample, "error", self.last_request,
                   [("error", f"{type(exc).__name__}: {_clip(exc, 1500)}{where}")])

    def samples(self):
        return sorted({c["sample"] for c in self.checks})

    def diffs(self):
        """[(sample, difference name, message)]"""
        return [(c["sample"], name, message) for c in self.checks for name, message in c["diffs"]]


# ---------------------------------------------------------------------------
# Novella, as the reference's sample tests see their cloud
# ---------------------------------------------------------------------------

class Request:
    def __init__(self, method, url, microversion, sample, admin):
        self.method, self.url, self.microversion = method, url, microversion
        self.sample, self.admin = sample, admin

    def describe(self):
        url = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                     "{uuid}", self.url)
        url = url.replace(PROJECT_ID, "{project_id}")
        return {"method": self.method, "url": url, "microversion": self.microversion,
                "template": self.sample if not self.sample.startswith(("GET ", "POST ", "PUT ",
                                                                         "DELETE ")) else None,
                "admin": self.admin}


class StatusCode(int):
    """A response's status: a test's ``assertEqual`` on it is a check."""

    def __new__(cls, value, response):
        obj = super().__new__(cls, value)
        obj.response = response
        return obj


class BodyText(str):
    def __new__(cls, value, response):
        obj = super().__new__(cls, value)
        obj.response = response
        return obj


class Response:
    """What ``requests`` would have returned to the reference's client."""

    def __init__(self, webob_response, request):
        self.request = request
        self.status_code = StatusCode(webob_response.status_int, self)
        self.content = webob_response.body
        self.text = BodyText(webob_response.text if self.content else "", self)
        self.headers = webob_response.headers

    def json(self):
        return json.loads(self.content)


class APIResponse:
    def __init__(self, response):
        self.status = response.status_code
        self.content = response.content
        self.headers = response.headers
        self.body = response.json() if response.content else {}


class OpenStackApiException(Exception):
    def __init__(self, message=None, response=None):
        self.response = response
        if response is not None:
            message = "%s\nStatus Code: %s\nBody: %s" % (message or "Unspecified error",
                                                         response.status_code, response.content)
        super().__init__(message or "Unspecified error")


class OpenStackApiNotFoundException(OpenStackApiException):
    pass


class Client:
    """The reference's TestOpenStackClient, sending to Novella in process."""

    def __init__(self, cloud, user, roles, test):
        self.cloud, self.auth_user, self.roles, self._test = cloud, user, roles, test
        self.project_id = PROJECT_ID
        self.microversion = None

    def api_request(self, relative_uri, check_response_status=None, strip_version=False,
                    method="GET", body=None, headers=None, sample=None):
        test = self._test
        base = "" if strip_version else "/" + test.api_major_version
        if test.USE_PROJECT_ID and self.project_id:
            base += "/" + self.project_id
        relative_uri = str(relative_uri)
        path = "%s/%s" % (base, relative_uri)
        path, _, query = path.partition("?")
        path = re.sub("/+", "/", path)
        req = webob.Request.blank("/", base_url=HOST, method=method)
        req.environ["PATH_INFO"] = urlparse.unquote(path)
        req.environ["QUERY_STRING"] = query
        req.headers["X-Auth-Token"] = f"{self.auth_user}:{self.project_id}"
        req.headers["X-Roles"] = ",".join(self.roles)
        for key, value in (headers or {}).items():
            req.headers[key] = value
        if self.microversion:
            req.headers["X-OpenStack-Nova-API-Version"] = self.microversion
            req.headers["OpenStack-API-Version"] = f"compute {self.microversion}"
        if body is not None:
            req.body = body.encode() if isinstance(body, str) else body
            req.content_type = "application/json"
        sample = sample or "%s %s" % (method, _url_shape(relative_uri))
        request = Request(method, relative_uri, self.microversion, sample,
                          "admin" in self.roles)
        test._run.last_request = request
        self.cloud.ensure_fixture_resources(req.environ["PATH_INFO"] + " " + (body or ""))
        resp = req.get_response(self.cloud.app)
        if method != "GET":
            # The reference runs casts as calls: a request's work is done
            # when its response is read.
            self.cloud.wait_idle()
        response = Response(resp, request)
        if check_response_status and response.status_code not in check_response_status:
            cls = OpenStackApiNotFoundException if response.status_code == 404 \
                else OpenStackApiException
            raise cls(message="Unexpected status code", response=response)
        return response

    def _checked(self, relative_uri, kwargs, default):
        """A request of the ``api_*`` methods; statuses the test named
        itself (``check_response_status=[410]``) are a check."""
        explicit = "check_response_status" in kwargs
        kwargs.setdefault("check_response_status", default)
        response = self.api_request(relative_uri, **kwargs)
        if explicit:
            self._test._run.check(response.request.sample, "status", response.request, [])
        return APIResponse(response)

    def api_get(self, relative_uri, **kwargs):
        return self._checked(relative_uri, kwargs, [200])

    def api_post(self, relative_uri, body, **kwargs):
        kwargs["method"] = "POST"
        if body:
            kwargs["body"] = json.dumps(body)
        return self._checked(relative_uri, kwargs, [200, 201, 202, 204])

    def api_put(self, relative_uri, body, **kwargs):
        kwargs["method"] = "PUT"
        if body:
            kwargs["body"] = json.dumps(body)
        return self._checked(relative_uri, kwargs, [200, 202, 204])

    def api_delete(self, relative_uri, **kwargs):
        kwargs["method"] = "DELETE"
        return self._checked(relative_uri, kwargs, [200, 202, 204])

    def get_server(self, server_id):
        return self.api_get("/servers/%s" % server_id).body["server"]

    def post_server(self, server):
        body = self.api_post("/servers", server).body
        return body if "reservation_id" in body else body["server"]

    def post_server_action(self, server_id, data, **kwargs):
        return self.api_post("/servers/%s/action" % server_id, data, **kwargs).body

    def post_server_volume(self, server_id, volume_attachment):
        return self.api_post("/servers/%s/os-volume_attachments" % server_id,
                             volume_attachment)

    def get_migrations(self, **kwargs):
        return self.api_get("os-migrations").body["migrations"]


def _url_shape(url):
    url = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "{uuid}",
                 str(url))
    url = re.sub(r"(?<=/)\d+(?=/|$|\?)", "{n}", url)
    return url.lstrip("/")


class Cloud:
    """A Novella all-in-one shaped like the reference's sample test cloud:
    one cell, compute hosts named as the reference's, the fake driver's
    sizes, its availability zone, its flavors and the fixtures' images and
    volumes."""

    def __init__(self, data_dir, availability_zone=None):
        from novella.conf import CONF
        overrides = {
            "api": {"compute_link_prefix": HOST},
            "simulated": {"hypervisor_type": "fake"},
        }
        if availability_zone:
            overrides[None] = {"default_availability_zone": availability_zone}
        self.conf = CONF
        self.data_dir = data_dir
        self._overrides = overrides
        self._flag_overrides = []
        self._fixture_ids = None
        self._created = set()
        _copy_template(data_dir)
        self.aio = self._start(data_dir, overrides)
        self.app = self.aio.compute_api_app

    @staticmethod
    def _start(data_dir, overrides):
        from novella.allinone import AllInOne
        return AllInOne(data_dir, cells=1, hosts_per_cell=0, log=None,
                        config_overrides=overrides).start()

    def seed(self):
        """What the reference's DefaultFlavorsFixture adds to Novella's five
        flavors (the same as its first five)."""
        admin = Client(self, "admin", ["reader", "member", "admin"], _SeedTest)
        status = admin.api_post("/flavors", {"flavor": {
            "name": "m1.tiny.specs", "id": "6", "ram": 512, "vcpus": 1, "disk": 1}}).status
        assert status == 200, status
        admin.api_post("/flavors/6/os-extra_specs", {"extra_specs": {"hw:numa_nodes": "1"}})

    def add_compute(self, host):
        options = dict(FAKE_DRIVER)
        options["nodename"] = FIRST_NODE if host == FIRST_COMPUTE else host
        self.aio.add_compute(host, **options)

    def wait_idle(self):
        self.aio.wait_idle(timeout=60)

    def set_flag(self, group, name, value):
        """A ``self.flags(...)`` of the test, where Novella has that option."""
        try:
            self.conf.set_override(name, value, group=group)
        except Exception:  # noqa: BLE001 - an option Novella does not have
            return False
        self._flag_overrides.append((name, group))
        return True

    def ensure_fixture_resources(self, text):
        """The fixtures' volumes and images a request names exist, with
        their fixed ids (the reference's Cinder, Glance and Neutron fixtures)."""
        if self._fixture_ids is None:
            self._fixture_ids = {v: ("volume", k) for k, v in cinder_volumes().items()}
            self._fixture_ids.update({img["id"]: ("image", img)
                                      for img in glance_images().values()})
            self._fixture_ids.update({net["id"]: ("network", dict(net, attr=attr))
                                      for attr, net in neutron_networks().items()})
        for fid, (kind, info) in self._fixture_ids.items():
            if fid in self._created or fid not in text:
                continue
            self._created.add(fid)
            from novella.context import RequestContext
            ctxt = RequestContext(user_id="admin", project_id=PROJECT_ID, is_admin=True,
                                  roles=["admin", "member", "reader"])
            if kind == "volume":
                self.aio.volume_api.create(ctxt, 1, name=info, id=fid)
            elif kind == "network":
                number = int(re.sub(r"\D", "", info["attr"]) or 1)
                self.aio.network_api.create_network(
                    ctxt, info.get("name") or info["attr"], cidr=f"192.168.{number}.0/24",
                    shared=True, id=fid)
            else:
                image = self.aio.image_api.create(
                    ctxt, name=info.get("name") or fid, id=fid, visibility="public",
                    disk_format=info.get("disk_format") or "raw",
                    container_format=info.get("container_format") or "bare",
                    properties=info.get("properties"))
                self.aio.image_api.upload(ctxt, image["id"], b"\0" * 1024)

    def stop(self):
        for name, group in self._flag_overrides:
            self.conf.clear_override(name, group=group)
        self.aio.stop()
        for group, values in self._overrides.items():
            for key in values:
                self.conf.clear_override(key, group=group)
        from novella.virt import simulated
        simulated.clear_faults()


_TEMPLATE = []


def _copy_template(data_dir):
    """A seeded, stopped all-in-one's data directory, made once per process
    and copied for each test (starting on it costs a fifth of a first start).
    The cell mappings name their databases by path: they are pointed at
    the copy."""
    import atexit
    import sqlite3
    if not _TEMPLATE:
        base = scratch_dir()
        atexit.register(shutil.rmtree, base, True)
        template = os.path.join(base, "data")
        cloud = Cloud.__new__(Cloud)
        cloud.aio = Cloud._start(template, {})
        cloud.app = cloud.aio.compute_api_app
        cloud._fixture_ids, cloud._created = {}, set()
        cloud.wait_idle = lambda: cloud.aio.wait_idle(timeout=60)
        cloud.seed()
        cloud.aio.stop()
        for name in os.listdir(template):
            if name.endswith(".db"):
                with contextlib.closing(sqlite3.connect(os.path.join(template, name))) as con:
                    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _TEMPLATE.append(template)
    template = _TEMPLATE[0]
    shutil.copytree(template, data_dir)
    with contextlib.closing(sqlite3.connect(os.path.join(data_dir, "api.db"))) as con:
        con.execute("UPDATE cell_mappings SET database_connection ="
                    " replace(database_connection, ?, ?)", (template, data_dir))
        con.commit()


class _SeedTest:
    """The client settings the cloud's own seeding requests use."""
    api_major_version = "v2.1"
    USE_PROJECT_ID = True

    class _run:
        last_request = None


class _Glance:
    """``self.glance``: the GlanceFixture's images, by their attribute names."""

    def __getattr__(self, name):
        images = glance_images()
        if name in images:
            return dict(images[name])
        raise AttributeError(name)


class ComputeService:
    """What ``start_service('compute', host=...)`` returns, read through the API."""

    def __init__(self, test, host):
        self._test, self.host = test, host
        self.manager = Internal(f"compute[{host}].manager")

    @property
    def service_ref(self):
        return _ServiceRef(self._test, self.host)


class _ServiceRef:
    def __init__(self, test, host):
        client = test._cloud_admin("2.53")
        services = client.api_get("os-services?binary=nova-compute&host=%s" % host).body
        service = services["services"][0]
        self.uuid = service["id"]
        self.host = host
        hypervisors = client.api_get("os-hypervisors/detail").body["hypervisors"]
        node = next(h for h in hypervisors if h["service"]["host"] == host)
        self.compute_node = types.SimpleNamespace(uuid=node["id"],
                                                  hypervisor_hostname=node["hypervisor_hostname"])
        legacy = test._cloud_admin(None)
        old = legacy.api_get("os-services?binary=nova-compute&host=%s" % host).body["services"]
        self.id = old[0]["id"]


# ---------------------------------------------------------------------------
# The base class the reference's sample tests derive from, here
# ---------------------------------------------------------------------------

class SampleTest(unittest.TestCase):
    """Stands for ``ApiSampleTestBaseV21`` (and ``ApiSampleTestBase``)."""

    sample_dir = None
    microversion = None
    _use_common_server_api_samples = False
    ADMIN_API = False
    USE_PROJECT_ID = True
    STUB_KEYSTONE = True
    SUPPORTS_CELLS = False
    api_major_version = "v2.1"
    availability_zones = ["us-west"]
    _additional_fixtures = []
    generate_samples = False
    scenarios = [("v2", {"api_major_version": "v2"}),
                 ("v2_1", {"api_major_version": "v2.1"}),
                 ("v2_1_noproject_id", {"api_major_version": "v2.1", "USE_PROJECT_ID": False})]

    # Set by the runner before setUp: the Run and a factory of the Cloud.
    _run = None
    _make_cloud = None

    def __init__(self, methodName="runTest"):
        super().__init__(methodName)
        self._subs = {}

    # -- the environment ----------------------------------------------------
    def setUp(self):
        self._cloud = type(self)._make_cloud(self)
        self.computes = {}
        self.policy = Internal("RealPolicyFixture")
        self.notifier = Internal("NotificationFixture")
        self.cinder = Internal("nova.tests.fixtures.CinderFixture")
        self.neutron = Internal("NeutronFixture")
        self.placement = Internal("PlacementFixture")
        self.glance = _Glance()
        self.ctxt = self.context = Internal("context")
        self.admin_api = Client(self._cloud, "admin", ["reader", "member", "admin"], self)
        self.api = self.admin_api if self.ADMIN_API else Client(
            self._cloud, "fake", ["reader", "member"], self)
        if self.microversion:
            self.api.microversion = self.microversion
            if not self.ADMIN_API:
                self.admin_api.microversion = self.microversion
        self.compute = self._setup_compute_service()

    def _cloud_admin(self, microversion):
        client = Client(self._cloud, "admin", ["reader", "member", "admin"], self)
        client.microversion = microversion
        return client

    def _setup_compute_service(self):
        return self.start_service("compute", host=FIRST_COMPUTE)

    def _setup_services(self):
        pass

    def start_service(self, name, host=None, **kwargs):
        if name != "compute":
            _note(f"start_service {name}")
            return Internal(f"service[{name}]")
        host = host or FIRST_COMPUTE
        self._cloud.add_compute(host)
        self.computes[host] = ComputeService(self, host)
        return self.computes[host]

    def flags(self, **kwargs):
        group = kwargs.pop("group", None)
        for name, value in kwargs.items():
            if not self._cloud.set_flag(group, name, value):
                _note(f"flags {group or 'DEFAULT'}.{name}={value!r}")

    def stub_out(self, old, new=None):
        if old in STUB_EQUIVALENTS:
            self._run.note_internal(f"stub_out {old} (done through the API)")
            STUB_EQUIVALENTS[old](self)
            return
        _note(f"stub_out {old}")

    def useFixture(self, fixture):
        _note(f"useFixture {getattr(fixture, '_path', type(fixture).__name__)}")
        return fixture

    def _wait_for_state_change(self, server, expected_status, max_retries=10):
        self._cloud.wait_idle()
        found = self.admin_api.get_server(server["id"])
        if found["status"] != expected_status:
            raise AssertionError("server %s is %s, expected %s"
                                 % (server["id"], found["status"], expected_status))
        return found

    def _wait_for_server_parameter(self, server, expected_params, max_retries=10,
                                   api=None):
        self._cloud.wait_idle()
        return (api or self.admin_api).get_server(server["id"])

    def _wait_for_migration_status(self, server, expected_statuses):
        self._cloud.wait_idle()
        for migration in self.admin_api.get_migrations():
            if migration["instance_uuid"] == server["id"]:
                return migration
        raise AssertionError("no migration for server %s" % server["id"])

    # -- what the reference's sample base provides --------------------------
    @property
    def subs(self):
        return self._subs

    @subs.setter
    def subs(self, value):
        bad = {k: v for k, v in value.items()
               if k != "compute_host" and not isinstance(v, str)}
        if bad:
            raise TypeError("subs can't contain non-string values:\n%s" % bad)
        self._subs = value

    @property
    def project_id(self):
        return getattr(self.api, "project_id", None) or PROJECT_ID

    @project_id.setter
    def project_id(self, value):
        self.api.project_id = value

    @classmethod
    def _get_sample_path(cls, name, dirname, suffix="", api_version=None):
        parts = [dirname, "api_samples"]
        if cls._use_common_server_api_samples:
            parts.append("servers")
        else:
            parts.append(cls.sample_dir)
            if api_version:
                parts.append("v" + api_version)
        parts.append(name + ".json" + suffix)
        return os.path.join(*parts)

    @classmethod
    def _get_sample(cls, name, api_version=None):
        return cls._get_sample_path(name, str(tests_dir()), api_version=api_version)

    @classmethod
    def _get_template(cls, name, api_version=None):
        return cls._get_sample_path(name, str(tests_dir()), suffix=".tpl",
                                    api_version=api_version)

    def _read_template(self, name):
        with open(self._get_template(name, self.microversion)) as f:
            return f.read().strip()

    def _write_template(self, name, data):
        raise AssertionError(f"the reference has no template {name!r} here")

    _write_sample = _write_template

    def _get_host(self):
        return HOST

    def _get_glance_host(self):
        return GLANCE_HOST

    def _get_compute_endpoint(self):
        return f"{HOST}/{self.project_id}" if self.USE_PROJECT_ID else HOST

    def _get_vers_compute_endpoint(self):
        return (f"{HOST}/{self.api_major_version}/{self.project_id}" if self.USE_PROJECT_ID
                else f"{HOST}/{self.api_major_version}")

    def _get_regexes(self):
        regexes = base_regexes(self.compute.host if self.compute else FIRST_COMPUTE)
        regexes["api_vers"] = self.api_major_version
        regexes["compute_endpoint"] = self._get_compute_endpoint()
        regexes["versioned_compute_endpoint"] = self._get_vers_compute_endpoint()
        return regexes

    def generalize_subs(self, subs, vanilla_regexes):
        return subs

    def _get_response(self, url, method, body=None, strip_version=False, headers=None,
                      sample=None):
        headers = dict(headers or {})
        headers["Content-Type"] = "application/json"
        headers["Accept"] = "application/json"
        return self.api.api_request(url, body=body, method=method, headers=headers,
                                    strip_version=strip_version, sample=sample)

    def _do_options(self, url, strip_version=False, headers=None):
        return self._get_response(url, "OPTIONS", strip_version=strip_version, headers=headers)

    def _do_get(self, url, strip_version=False, headers=None, return_json_body=False):
        response = self._get_response(url, "GET", strip_version=strip_version, headers=headers)
        if return_json_body and hasattr(response, "content"):
            return json.loads(response.content)
        return response

    def _do_post(self, url, name=None, subs=None, method="POST", headers=None):
        self.subs = {} if subs is None else subs
        body, sample = None, None
        if name:
            path = self._get_template(name, self.microversion)
            sample = template_id(path)
            body = self._read_template(name) % self.subs
        return self._get_response(url, method, body, headers=headers, sample=sample)

    def _do_put(self, url, name=None, subs=None, headers=None):
        if name:
            return self._do_post(url, name, subs, method="PUT", headers=headers)
        return self._get_response(url, "PUT", headers=headers)

    def _do_delete(self, url, headers=None):
        return self._get_response(url, "DELETE", headers=headers)

    def _verify_response(self, name, subs, response, exp_code, update_links=True):
        regexes = self._get_regexes()
        regexes.update(subs)
        self.subs = regexes
        path = self._get_template(name, self.microversion)
        sample = template_id(path) if os.path.exists(path) else \
            "%s/%s (no such template)" % (self.sample_dir, name)
        request = response.request
        if response.status_code != exp_code:
            self._run.check(sample, "response", request, [(
                "status", f"{request.method} {request.url}: {int(response.status_code)}"
                          f" {_clip(response.text, 500)}, expected {exp_code}")])
            raise Stop()
        if not os.path.exists(path):
            self._run.check(sample, "response", request, [("error", "no such template")])
            raise Stop()
        try:
            result = objectify(pretty_data(response.content))
        except ValueError:
            self._run.check(sample, "response", request, [(
                "body", f"no JSON body: {_clip(response.text, 300)!r}")])
            return None
        matcher = Matcher(self.subs)
        matched = matcher.compare(objectify(self._read_template(name)), result)
        self._run.check(sample, "response", request, matcher.diffs)
        return matched

    # -- checks the tests make with asserts ---------------------------------
    def assertRaises(self, expected_exception, *args, **kwargs):
        """testtools' assertRaises (the reference's base): returns the exception."""
        if not args:
            return super().assertRaises(expected_exception, **kwargs)
        func, args = args[0], args[1:]
        try:
            func(*args, **kwargs)
        except expected_exception as exc:
            return exc
        raise AssertionError(f"{func} did not raise {expected_exception}")

    def assertEqual(self, first, second, msg=None):
        for expected, got in ((first, second), (second, first)):
            if isinstance(got, StatusCode) and not isinstance(expected, StatusCode):
                request = got.response.request
                diffs = [] if int(got) == expected else [(
                    "status", f"{request.method} {request.url}: {int(got)}"
                              f" {_clip(got.response.text, 500)}, expected {expected}")]
                self._run.check(request.sample, "status", request, diffs)
                if diffs:
                    raise Stop()
                return
            if isinstance(got, BodyText) and not isinstance(expected, BodyText):
                request = got.response.request
                diffs = [] if got == expected else [(
                    "body", f"{request.method} {request.url}: body {_clip(got, 300)!r},"
                            f" expected {expected!r}")]
                self._run.check(request.sample, "body", request, diffs)
                return
        super().assertEqual(first, second, msg)


# ---------------------------------------------------------------------------
# What some reference tests set up inside the reference, done through the API
# ---------------------------------------------------------------------------

def _flavor_with_description(extra_specs=None):
    """FlavorsSampleJsonTest255/261.setUp: one more flavor, after the last
    one by id, with a description (and extra specs), made by the admin."""
    def setUp(self, _parent):
        _parent()
        admin = self._cloud_admin("2.55")
        flavors = admin.api_get("flavors").body["flavors"]
        new_id = max(int(f["id"]) for f in flavors if f["id"].isdigit()) + 1
        admin.api_post("flavors", {"flavor": {
            "name": "m1.small.description", "id": str(new_id), "ram": 2048, "vcpus": 1,
            "disk": 20, "description": "test description"}})
        if extra_specs:
            admin.api_post("flavors/%s/os-extra_specs" % new_id, {"extra_specs": extra_specs})
        self.flavor_show_id = new_id
        self.subs = {"flavorid": new_id}
    return setUp


# (module, class): a replacement of that class's own setUp, given the setUp
# of its parent class to call first.
SETUP_EQUIVALENTS = {
    ("test_flavors", "FlavorsSampleJsonTest255"): _flavor_with_description(),
    ("test_flavors", "FlavorsSampleJsonTest261"): _flavor_with_description(
        {"hw:numa_nodes": "1", "hw:cpu_policy": "shared"}),
}


def _force_computes_down(test):
    """``service_is_up`` made False: every compute service of the test is
    forced down through the API."""
    admin = test._cloud_admin("2.53")
    for host in list(test.computes):
        service = admin.api_get("os-services?binary=nova-compute&host=%s" % host).body
        admin.api_put("os-services/%s" % service["services"][0]["id"], {"forced_down": True})


def _start_test_host(test):
    """``service_get_by_compute_host`` made to find any host: the host the
    evacuation tests name (``testHost``) is started."""
    if "testHost" not in test.computes:
        test.start_service("compute", host="testHost")


# A stub_out of the reference's code: what it makes true, made true in Novella.
STUB_EQUIVALENTS = {
    "nova.servicegroup.api.API.service_is_up": _force_computes_down,
    "nova.compute.api.HostAPI.service_get_by_compute_host": _start_test_host,
}


def _hosts_named(value):
    """The ``host=`` of the reference objects a mock is made to return."""
    found = []
    if isinstance(value, Internal):
        if isinstance(value._kwargs.get("host"), str):
            found.append(value._kwargs["host"])
        for item in list(value._args) + list(value._kwargs.values()):
            found += _hosts_named(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += _hosts_named(item)
    return found


def _start_hosts_returned(test, value):
    """``ComputeNodeList.get_all_by_host`` made to return compute nodes of
    other hosts: those hosts are started."""
    for host in _hosts_named(value):
        if host not in test.computes:
            test.start_service("compute", host=host)


# A mock.patch of the reference's code whose return value is set: what it
# makes exist, made to exist in Novella.
PATCH_EQUIVALENTS = {
    "nova.objects.ComputeNodeList.get_all_by_host": _start_hosts_returned,
}


def _install_equivalents(module_name, module):
    for (mod, class_name), replacement in SETUP_EQUIVALENTS.items():
        cls = getattr(module, class_name, None) if mod == module_name else None
        if cls is None:
            continue

        def setUp(self, _cls=cls, _replacement=replacement):
            _replacement(self, super(_cls, self).setUp)
        cls.setUp = setUp


# ---------------------------------------------------------------------------
# Running one reference test against a fresh Novella
# ---------------------------------------------------------------------------

_LOADER = []


def loader():
    if not _LOADER:
        _LOADER.append(ReferenceLoader())
    return _LOADER[0]


def scratch_dir():
    shm = pathlib.Path("/dev/shm")
    return tempfile.mkdtemp(prefix="novella-samples-",
                            dir=str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None)


def run_test(module_name, class_name, method_name):
    """Replay one reference test; returns its :class:`Run`."""
    module = loader().module(module_name)
    cls = getattr(module, class_name)
    run = Run(f"{class_name}.{method_name}")
    scenario, attrs = pick_scenario(cls)
    work = scratch_dir()
    clouds = []

    def make_cloud(test):
        cloud = Cloud(os.path.join(work, "data"),
                      availability_zone=(test.availability_zones or [None])[0])
        clouds.append(cloud)
        return cloud

    # A class of the test's own, so that what the run sets stays in the run.
    runner_cls = type(cls.__name__, (cls,), dict(attrs, _run=run, _make_cloud=make_cloud,
                                                 __module__=cls.__module__))
    test = runner_cls(method_name)
    _CURRENT.append(run)
    _CURRENT_TEST.append(test)
    try:
        test.setUp()
        getattr(test, method_name)()
    except Stop:
        pass
    except OpenStackApiException as exc:
        # A request of the reference's client answered with a status it
        # did not accept.
        response = exc.response
        run.check(response.request.sample, "status", response.request, [(
            "status", f"{response.request.method} {response.request.url}:"
                      f" {int(response.status_code)} {_clip(response.text, 500)}")])
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        run.error(exc)
    finally:
        _CURRENT.pop()
        _CURRENT_TEST.pop()
        try:
            test.doCleanups()
        except Exception:  # noqa: BLE001
            pass
        for cloud in clouds:
            cloud.stop()
        shutil.rmtree(work, ignore_errors=True)
    return run


@contextlib.contextmanager
def quiet_logs():
    import logging
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        root.setLevel(level)
