// The fleet dashboard: polls this endpoint's /v1/fleet and Watcher resources every second
// and redraws. Text from the API only ever goes through textContent (server names are
// anyone's input). The token comes from the URL fragment (#token=..., never sent to a
// server, removed from the address bar at once) or the form, and is kept for the tab only.
"use strict";
(function () {
  const POLL_MS = 1000;
  const V1 = new URL("../v1/", location.href);   // the page is /dashboard/ on the endpoint
  const TOKEN_KEY = "novella-dashboard-token";
  const OPEN_PLAN_STATES = new Set(["RECOMMENDED", "PENDING", "ONGOING", "SUSPENDED",
                                    "CANCELLING"]);
  const FINISHED_PLANS_SHOWN = 3;
  const ACTION_STATES = ["SUCCEEDED", "ONGOING", "PENDING", "FAILED", "CANCELLING",
                         "CANCELLED", "SKIPPED"];
  const RC_ORDER = ["VCPU", "MEMORY_MB", "DISK_GB"];
  // Watcher's microversion with each plan's and action's status_message
  const WATCHER_VERSION = "infra-optim 1.5";
  const FAILURES_SHOWN = 10;
  const APART_SHOWN = 20;    // disabled or down hosts listed by name under each group
  const MOVES_SHOWN = 20;
  const HOVER_MS = 150;      // a host hovered this long is drilled into

  const $ = (id) => document.getElementById(id);
  const finishedPlans = new Map();   // uuid -> its actions, read once its state is final
  let token = null;
  let polls = 0;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  class AuthError extends Error {}

  // -- the token --------------------------------------------------------------------------
  function takeToken() {
    // read by hand: URLSearchParams would turn a "+" of the token into a space
    const found = /(?:^|&)token=([^&]+)/.exec(location.hash.slice(1));
    if (found) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(found[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function askToken(reason) {
    $("main").hidden = true;
    $("login").hidden = false;
    $("login-reason").textContent = reason;
    setStatus("Waiting for a token", true);
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    token = value;
    $("token").value = "";
    $("login").hidden = true;
    poll();
  });

  // -- reading the API ------------------------------------------------------------------
  async function getJSON(url) {
    const resp = await fetch(url, {headers: {"X-Auth-Token": token, "Accept": "application/json",
                                             "OpenStack-API-Version": WATCHER_VERSION},
                                   cache: "no-store"});
    if (resp.status === 401 || resp.status === 403) {
      throw new AuthError(resp.status === 401 ? "The token was refused (expired or unknown)."
                                              : "The token's user is not an administrator.");
    }
    if (!resp.ok) throw new Error(`${resp.status} from ${new URL(url).pathname}`);
    return resp.json();
  }

  // Every page of a Watcher collection, following its "next" links on this endpoint.
  async function collect(path, key) {
    const items = [];
    let url = new URL(path, V1).href;
    for (let pages = 0; url && pages < 100; pages++) {
      const body = await getJSON(url);
      items.push(...(body[key] || []));
      // "next" names this endpoint as the server sees it: keep its path below /v1/ only
      const next = body.next ? new URL(body.next, V1) : null;
      url = next ? new URL(next.pathname.split("/v1/").pop() + next.search, V1).href : null;
    }
    return items;
  }

  // The plans worth showing: every open one, and the last few that ended.
  async function readPlans() {
    let plans;
    try {
      plans = await collect("action_plans", "action_plans");
    } catch (err) {
      if (err instanceof AuthError) throw err;
      return {error: String(err.message || err), plans: []};
    }
    const open = plans.filter((p) => OPEN_PLAN_STATES.has(p.state));
    const ended = plans.filter((p) => !OPEN_PLAN_STATES.has(p.state)).slice(-FINISHED_PLANS_SHOWN);
    const shown = open.concat(ended.reverse());
    for (const plan of shown) {
      if (finishedPlans.has(plan.uuid)) {
        plan.actions = finishedPlans.get(plan.uuid);
        continue;
      }
      plan.actions = await collect(
        `actions?action_plan_uuid=${encodeURIComponent(plan.uuid)}`, "actions");
      if (!OPEN_PLAN_STATES.has(plan.state)) finishedPlans.set(plan.uuid, plan.actions);
    }
    return {error: null, plans: shown};
  }

  // -- drawing --------------------------------------------------------------------------
  function setStatus(text, error) {
    $("status").textContent = text;
    $("status").classList.toggle("error", Boolean(error));
  }

  function count(actions, predicate) {
    return actions.filter(predicate).length;
  }

  function planCard(plan) {
    const actions = plan.actions || [];
    const total = actions.length;
    const done = count(actions, (a) => a.state === "SUCCEEDED");
    const failed = count(actions, (a) => a.state === "FAILED");
    const ongoing = count(actions, (a) => a.state === "ONGOING");
    const moves = actions.filter((a) => a.action_type === "migrate" || a.action_type === "resize");
    const moved = count(moves, (a) => a.state === "SUCCEEDED");
    const meter = el("div", {class: "meter"});
    for (const [cls, n] of [["done", done], ["failed", failed], ["ongoing", ongoing]]) {
      if (total && n) meter.append(el("div", {class: cls, style: `width:${100 * n / total}%`}));
    }
    const states = el("div", {class: "plan-states"});
    for (const state of ACTION_STATES) {
      const n = count(actions, (a) => a.state === state);
      if (n) states.append(el("span", {"data-state": state}, `${state} ${n}`));
    }
    const failures = el("ul", {class: "plan-failures"});
    for (const a of actions.filter((a) => a.state === "FAILED").slice(0, FAILURES_SHOWN)) {
      const p = a.input_parameters || {};
      failures.append(el("li", {"data-failed-action": a.uuid},
        `${a.action_type} ${p.resource_name || p.resource_id || a.uuid}: ` +
        `${a.status_message || "failed"}`));
    }
    if (failed > FAILURES_SHOWN) failures.append(el("li", {}, `and ${failed - FAILURES_SHOWN} more`));
    return el("div", {class: "plan", "data-plan": plan.uuid, "data-state": plan.state,
                      "data-done": done, "data-total": total, "data-failed": failed},
      el("div", {class: "plan-head"},
        el("span", {class: `state state-${plan.state}`}, plan.state),
        el("span", {class: "uuid"}, plan.uuid),
        plan.strategy_name ? el("span", {class: "muted"}, plan.strategy_name) : null,
        el("span", {class: "plan-progress"}, `${done}/${total} actions done`),
        moves.length ? el("span", {class: "plan-moves"},
                          `${moved}/${moves.length} servers moved`) : null,
        failed ? el("span", {class: "plan-failed"}, `${failed} failed`) : null),
      meter, states,
      plan.status_message ? el("p", {class: "plan-message"}, plan.status_message) : null,
      failed ? failures : null);
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.round(seconds);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  }

  // A plan's name and times come with the fleet (its audit's source and target).
  function planTimes(summary) {
    if (!summary) return null;
    return el("div", {class: "plan-times"},
      el("span", {class: "plan-started"},
         summary.started_at ? `started ${new Date(summary.started_at).toLocaleTimeString()}`
                            : "not started"),
      el("span", {class: "plan-elapsed", "data-elapsed": summary.elapsed_s ?? ""},
         `elapsed ${duration(summary.elapsed_s)}`),
      summary.remaining_s !== null
        ? el("span", {class: "plan-remaining", "data-remaining": summary.remaining_s},
             `about ${duration(summary.remaining_s)} left`) : null);
  }

  function drawPlans(result, summaries, failedAudits) {
    const byUuid = new Map(summaries.map((p) => [p.uuid, p]));
    const list = $("plan-list");
    list.replaceChildren(...result.plans.map((plan) => {
      const card = planCard(plan);
      const summary = byUuid.get(plan.uuid);
      if (summary) {
        card.querySelector(".plan-head").prepend(el("span", {class: "plan-name"}, summary.name));
        card.querySelector(".plan-head").after(planTimes(summary));
      }
      return card;
    }));
    $("no-plans").hidden = result.plans.length > 0;
    $("no-plans").textContent = result.error ? `Action plans could not be read: ${result.error}`
                                             : "No action plan.";
    $("failed-audits").replaceChildren(...failedAudits.map((a) =>
      el("li", {"data-failed-audit": a.uuid},
        el("strong", {}, `${a.plan_name} (audit ${a.name}) failed`),
        ` at ${new Date(a.failed_at).toLocaleTimeString()}: ${a.reason || "no reason recorded"}`)));
    $("failed-audits-box").hidden = failedAudits.length === 0;
  }

  function rcNames(resources) {
    const names = Object.keys(resources);
    const rank = (rc) => (RC_ORDER.includes(rc) ? RC_ORDER.indexOf(rc) : RC_ORDER.length);
    return names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  }

  // -- the heat-map: one small square per host, coloured by its most-used class ----------
  function useColour(use) {
    // green (idle) through yellow to red (full); a host over its capacity stays red
    const hue = 120 * (1 - Math.min(1, use));
    return `hsl(${hue}, 70%, ${use ? 45 : 80}%)`;
  }

  function hostCell(host) {
    const flags = [host.state === "down" ? "down" : "", host.status === "disabled" ? "disabled" : ""];
    const node = el("div", {class: `hm ${flags.join(" ").trim()}`, "data-host": host.host,
                            "data-node": host.hypervisor_hostname,
                            "data-provider": host.provider_uuid,
                            "data-servers": host.servers, "data-use": host.use,
                            title: `${host.host}: ${Math.round(100 * host.use)}% used, ` +
                                   `${plural(host.servers, "server")}, ${host.state}, ${host.status}` +
                                   (host.disabled_reason ? ` (${host.disabled_reason})` : "")});
    node.style.background = useColour(host.use);
    if (host.provider_uuid === selected) node.classList.add("selected");
    return node;
  }

  // The hosts set apart, with why, under their group: not only on hover.
  function setApart(hosts) {
    const list = el("ul", {class: "apart"});
    // disabled hosts first: each has a reason to read
    const apart = hosts.filter((h) => h.status === "disabled")
      .concat(hosts.filter((h) => h.status !== "disabled" && h.state === "down"));
    for (const h of apart.slice(0, APART_SHOWN)) {
      list.append(el("li", {"data-apart": h.host},
        el("span", {class: "host-name"}, h.host), " ",
        h.state === "down" ? el("span", {class: "badge down"}, "down") : null, " ",
        h.status === "disabled" ? el("span", {class: "badge disabled"}, "disabled") : null, " ",
        h.status === "disabled" ? el("span", {class: "reason"}, h.disabled_reason || "no reason given")
                                : null));
    }
    if (apart.length > APART_SHOWN) list.append(el("li", {}, `and ${apart.length - APART_SHOWN} more`));
    return apart.length ? list : null;
  }

  function groupCard(group, attrs, names) {
    const servers = group.hosts.reduce((n, h) => n + h.servers, 0);
    const used = group.hosts.reduce((n, h) => n + h.use, 0);
    const card = el("div", Object.assign({class: "cell"}, attrs),
      el("div", {class: "cell-head"},
        el("h2", {}, group.name),
        el("span", {class: "counts"},
           `${plural(group.hosts.length, "host")}, ${plural(servers, "server")}` +
           (group.migrations ? `, ${plural(group.migrations.length, "move")} in flight` : "") +
           (group.hosts.length ? `, ${Math.round(100 * used / group.hosts.length)}% used on average` : "")),
        group.disabled ? el("span", {class: "badge disabled"}, "disabled") : null));
    if (group.error) card.append(el("p", {class: "cell-error"}, group.error));
    const map = el("div", {class: "heatmap"});
    map.append(...group.hosts.map(hostCell));
    card.append(map);
    const apart = setApart(group.hosts);
    if (apart) card.append(apart);
    if (group.migrations && group.migrations.length) {
      const moves = el("ul", {class: "moves"});
      for (const m of group.migrations.slice(0, MOVES_SHOWN)) {
        // the destination is unknown until the scheduler chose it
        moves.append(el("li", {"data-migration": m.uuid, "data-instance": m.instance_uuid},
          `${names.get(m.instance_uuid) || m.instance_uuid}: ${m.migration_type} ` +
          `${m.source_compute || "…"} → ${m.dest_compute || "…"}, ${m.status}` +
          `${m.cross_cell_move ? " (across cells)" : ""}`));
      }
      if (group.migrations.length > MOVES_SHOWN) {
        moves.append(el("li", {}, `and ${group.migrations.length - MOVES_SHOWN} more`));
      }
      card.append(el("div", {}, el("strong", {}, "Moves in flight"), moves));
    }
    return card;
  }

  // Groups by aggregate: a host in several is in each; hosts in none are "no aggregate".
  function byAggregate(fleet) {
    const hosts = new Map();
    for (const cell of fleet.cells) for (const h of cell.hosts) hosts.set(h.host, h);
    const placed = new Set();
    const groups = fleet.aggregates.map((agg) => {
      const members = agg.hosts.filter((name) => hosts.has(name)).map((name) => hosts.get(name));
      members.forEach((h) => placed.add(h.host));
      return {name: agg.name, hosts: members};
    });
    const rest = [...hosts.values()].filter((h) => !placed.has(h.host));
    if (rest.length) groups.push({name: "no aggregate", hosts: rest});
    return groups;
  }

  function drawFleet(fleet) {
    const t = fleet.totals;
    $("totals").replaceChildren(
      el("span", {}, plural(t.cells, "cell")), el("span", {}, plural(t.hosts, "host")),
      el("span", {}, plural(t.servers, "server")),
      el("span", {}, `${plural(t.migrations, "move")} in flight`));
    const names = serverNames;
    const cards = $("group-by").value === "aggregate"
      ? byAggregate(fleet).map((g) => groupCard(g, {"data-aggregate": g.name}, names))
      : fleet.cells.map((cell) => groupCard(cell, {"data-cell": cell.name, "data-uuid": cell.uuid},
                                            names));
    $("cells").replaceChildren(...cards);
  }

  // -- the drill-down: one host, its resource classes and its servers --------------------
  let selected = null;        // the provider uuid of the host shown in the drill-down
  const serverNames = new Map();   // server uuid -> name, of the hosts drilled into

  async function drawHost(providerUuid) {
    const body = await getJSON(new URL(`fleet/hosts/${encodeURIComponent(providerUuid)}`, V1).href);
    const host = body.host;
    if (selected !== providerUuid) return;   // another host was chosen meanwhile
    const resources = el("div", {class: "resources"});
    for (const rc of rcNames(host.resources)) {
      const r = host.resources[rc];
      const share = r.capacity ? Math.min(100, 100 * r.used / r.capacity) : 100;
      resources.append(
        el("span", {class: "rc"}, rc),
        el("div", {class: "usage"}, el("div", {class: share >= 90 ? "high" : "",
                                             style: `width:${share}%`})),
        el("span", {class: "numbers", "data-rc": rc, "data-used": r.used,
                    "data-capacity": r.capacity}, `${r.used} / ${r.capacity}`));
    }
    const servers = el("div", {class: "servers"});
    for (const s of host.servers) {
      serverNames.set(s.id, s.name || s.id);
      servers.append(el("span", {class: `server status-${s.status}`, "data-server": s.id,
                                 title: `${s.id} ${s.status}`}, s.name || s.id));
    }
    $("detail").replaceChildren(el("div", {class: "host", "data-detail": host.provider_uuid,
                                           "data-host": host.host, "data-cell": host.cell},
      el("div", {class: "host-head"},
        el("span", {class: "host-name"}, host.host),
        el("span", {class: "muted"}, host.cell),
        el("span", {class: `badge ${host.state}`}, host.state),
        el("span", {class: `badge ${host.status}`}, host.status),
        host.disabled_reason ? el("span", {class: "reason"}, host.disabled_reason) : null,
        el("span", {class: "muted server-count"}, plural(host.servers.length, "server"))),
      resources,
      host.servers.length ? servers : el("p", {class: "muted"}, "No server.")));
    $("detail").hidden = false;
  }

  function choose(providerUuid) {
    if (!providerUuid || providerUuid === selected) return;
    selected = providerUuid;
    for (const node of document.querySelectorAll(".hm.selected")) node.classList.remove("selected");
    const node = document.querySelector(`.hm[data-provider="${providerUuid}"]`);
    if (node) node.classList.add("selected");
    drawHost(providerUuid).catch((err) => setStatus(`Host not read: ${err.message || err}`, true));
  }

  // One listener for every square: clicking chooses a host, hovering shows it.
  let hoverTimer = null;
  $("cells").addEventListener("click", (event) => {
    const node = event.target.closest(".hm");
    if (node) choose(node.dataset.provider);
  });
  $("cells").addEventListener("mouseover", (event) => {
    const node = event.target.closest(".hm");
    clearTimeout(hoverTimer);
    if (node) hoverTimer = setTimeout(() => choose(node.dataset.provider), HOVER_MS);
  });
  $("group-by").addEventListener("change", () => { if (lastFleet) drawFleet(lastFleet); });
  let lastFleet = null;

  // -- the loop -------------------------------------------------------------------------
  async function poll() {
    if (!token) {
      askToken("This dashboard reads the fleet with an administrator's token.");
      return;
    }
    try {
      const [fleet, plans] = await Promise.all([getJSON(new URL("fleet", V1).href), readPlans()]);
      lastFleet = fleet.fleet;
      drawFleet(fleet.fleet);
      drawPlans(plans, fleet.fleet.plans, fleet.fleet.failed_audits);
      if (selected) await drawHost(selected);
      $("main").hidden = false;
      polls += 1;
      document.body.dataset.polls = polls;
      const read = fleet.fleet.usage_read;
      document.body.dataset.usage = read.source;
      setStatus(`Updated ${new Date().toLocaleTimeString()}; ` + (read.source === "hosts"
                ? "usage as the hosts reported it (Placement is being read)"
                : `usage read ${new Date(read.at).toLocaleTimeString()} (in ${read.seconds} s)`),
                false);
    } catch (err) {
      if (err instanceof AuthError) {
        sessionStorage.removeItem(TOKEN_KEY);
        token = null;
        askToken(err.message);
        return;
      }
      setStatus(`Not updated: ${err.message || err}`, true);
    }
    // a tab nobody looks at asks ten times less often
    setTimeout(poll, document.hidden ? 10 * POLL_MS : POLL_MS);
  }

  token = takeToken();
  poll();
})();
