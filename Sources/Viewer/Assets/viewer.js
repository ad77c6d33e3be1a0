// agent-eval's viewer: draws a run, a pipeline, an eval report or a diff from the JSON document embedded in
// the page (docs/viewer.md). Every value from the log is untrusted: it reaches the page only as
// text nodes (textContent), never as markup, and the page's Content-Security-Policy lets no
// other script run and no request leave.
(function () {
  'use strict';

  // ---------------------------------------------------------------- DOM helpers
  function el(tag, attributes) {
    const node = document.createElement(tag);
    if (attributes) {
      for (const key of Object.keys(attributes)) {
        const value = attributes[key];
        if (value === undefined || value === null || value === false) continue;
        if (key === 'class') node.className = value;
        else if (key === 'text') node.textContent = String(value);
        else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
        else node.setAttribute(key, String(value));
      }
    }
    for (let index = 2; index < arguments.length; index++) append(node, arguments[index]);
    return node;
  }
  // Appends each child given after the node (arrays flattened, null and false skipped).
  function append(node, child) {
    if (arguments.length > 2) { for (let index = 1; index < arguments.length; index++) append(node, arguments[index]); return; }
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { for (const item of child) append(node, item); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function badge(text, kind) { return el('span', { class: 'badge ' + (kind || text || '') }, text); }
  // The stops that end a run as it meant to (the run page's stop line, the runs list's badge).
  const goodStops = ['success', 'user_stop', 'user_transfer', 'user_out_of_scope', 'agent_stop'];
  function fact(label, value) {
    if (value === undefined || value === null || value === '') return null;
    return el('span', null, label + ' ', el('b', null, String(value)));
  }

  // ---------------------------------------------------------------- formatting
  function duration(us) {
    if (us === undefined || us === null) return '–';
    if (us < 1000) return us + ' µs';
    if (us < 1000000) return (Math.round(us / 100) / 10).toFixed(1) + ' ms';
    return (Math.round(us / 10000) / 100).toFixed(2) + ' s';
  }
  function time(us) {
    if (!us) return '';
    const date = new Date(Math.floor(us / 1000));
    return isNaN(date.getTime()) ? String(us) : date.toISOString().replace('T', ' ').replace('Z', ' UTC');
  }
  function size(count) {
    if (count < 1024) return count + ' B';
    if (count < 1048576) return (count / 1024).toFixed(1) + ' KB';
    return (count / 1048576).toFixed(1) + ' MB';
  }
  function jsonText(value) { return typeof value === 'string' ? value : JSON.stringify(value, null, 2); }
  function oneLine(value) { return typeof value === 'string' ? value : JSON.stringify(value); }
  function shorten(text, limit) { return text.length > limit ? text.slice(0, limit - 1) + '…' : text; }
  function money(usd) { return usd ? '$' + Number(usd).toFixed(usd < 0.01 ? 5 : 4) : '$0'; }

  // A payload: shown whole when small, else collapsed with its size and drawn only when opened.
  const collapseAt = 700;
  function payload(value, mark) {
    const text = jsonText(value);
    if (text.length <= collapseAt) return el('pre', null, mark ? markedJSON(value, mark) : text);
    const details = el('details', { class: 'large' }, el('summary', null, 'show ' + size(new Blob([text]).size) + ' (' + text.split('\n').length + ' lines)'));
    let drawn = false;
    details.addEventListener('toggle', function () {
      if (details.open && !drawn) { drawn = true; append(details, el('pre', null, mark ? markedJSON(value, mark) : text)); }
    });
    if (mark) { details.open = true; }
    return details;
  }

  // Pretty JSON as DOM nodes, with the value at `mark.path` (`arguments.items[0].sku`) marked.
  function markedJSON(value, mark) {
    const fragment = document.createDocumentFragment();
    function walk(node, path, indent, sink) {
      if (path === mark.path) {
        const holder = el('mark', { class: 'divergence', title: mark.title || '' });
        append(sink, holder);
        sink = holder;
      }
      const out = function (text) { append(sink, document.createTextNode(text)); };
      if (Array.isArray(node)) {
        if (node.length === 0) { out('[]'); return; }
        out('[\n');
        node.forEach(function (item, index) {
          out(indent + '  ');
          walk(item, path + '[' + index + ']', indent + '  ', sink);
          out(index < node.length - 1 ? ',\n' : '\n');
        });
        out(indent + ']');
      } else if (node && typeof node === 'object') {
        const keys = Object.keys(node);
        if (keys.length === 0) { out('{}'); return; }
        out('{\n');
        keys.forEach(function (key, index) {
          out(indent + '  ' + JSON.stringify(key) + ': ');
          walk(node[key], path ? path + '.' + key : key, indent + '  ', sink);
          out(index < keys.length - 1 ? ',\n' : '\n');
        });
        out(indent + '}');
      } else {
        out(JSON.stringify(node));
      }
    }
    walk(value, mark.root || '', '', fragment);
    return fragment;
  }

  // ---------------------------------------------------------------- one step
  // Draws a step of a replay document: its problems, then each event, then what changed.
  function stepCard(step, context) {
    const digests = {};
    for (const check of step.digests || []) digests[check.seq] = check;
    const card = el('section', {
      class: 'step' + (step.problems && step.problems.length ? ' has-problem' : ''),
      id: context.prefix + 'step-' + step.step, 'data-step': step.step
    });
    const first = step.events && step.events[0];
    append(card, el('div', { class: 'step-head' },
      el('a', { class: 'title', href: '#' + context.prefix + 'step-' + step.step }, 'Step ' + step.step),
      el('span', { class: 'muted mono' }, step.first_seq === step.last_seq ? 'seq ' + step.first_seq : 'seq ' + step.first_seq + '–' + step.last_seq),
      el('span', { class: 'muted' }, first ? time(first.time_us) : ''),
      (step.problems || []).length ? badge(step.problems.length + (step.problems.length === 1 ? ' problem' : ' problems'), 'bad') : null));
    const body = el('div', { class: 'body' });
    for (const problem of step.problems || []) {
      append(body, el('div', { class: 'problem', 'data-kind': problem.kind }, '⚠ ' + problem.kind.replace(/_/g, ' ') + ' (seq ' + problem.seq + '): ' + problem.message));
    }
    for (const event of step.events || []) append(body, eventRow(event, digests[event.seq], context));
    if (step.changes && step.changes.length) {
      append(body, el('div', { class: 'event' }, el('div', { class: 'kind' }, 'state'),
        el('div', null, step.changes.join(', '),
          el('details', null, el('summary', null, 'state at the end of step ' + step.step), stateTable(step.state)))));
    }
    append(card, body);
    return card;
  }

  function stateTable(state) {
    const table = el('table', { class: 'state' });
    for (const key of Object.keys(state || {})) {
      append(table, el('tr', null, el('th', null, key.replace(/_/g, ' ')), el('td', { class: 'mono' }, oneLine(state[key]))));
    }
    return table;
  }

  function refList(label, items, describe) {
    if (!items || !items.length) return null;
    return el('div', null, el('span', { class: 'muted' }, label + ' (' + items.length + ')'),
      el('ul', { class: 'items' }, items.map(function (item) { return el('li', null, describe(item)); })));
  }

  function contentLink(hash, context) {
    const content = context.contents[hash];
    if (!content) return el('span', { class: 'mono muted' }, hash + ' (not in this log)');
    const details = el('details', { class: 'content' }, el('summary', { class: 'mono' },
      'content ' + hash.slice(0, 19) + '… ' + (content.media_type || '') + ', ' + size(content.byte_count || (content.body || '').length)));
    let drawn = false;
    details.addEventListener('toggle', function () {
      if (details.open && !drawn) {
        drawn = true;
        append(details, el('pre', null, content.encoding === 'base64' ? '(binary, base64) ' + content.body : content.body));
      }
    });
    return details;
  }

  function callArguments(callId, argumentsValue, context) {
    const highlight = context.highlight;
    if (highlight && highlight.callId === callId && highlight.field && highlight.field.indexOf('arguments') === 0) {
      return payload(argumentsValue, { path: highlight.field, root: 'arguments', title: 'first divergence' });
    }
    return payload(argumentsValue);
  }

  function eventRow(event, digest, context) {
    const data = event.data || {};
    const row = el('div', { class: 'event ' + event.kind, 'data-seq': event.seq, 'data-kind': event.kind });
    const highlight = context.highlight;
    const callId = data.call_id;
    if (highlight && callId && highlight.callId === callId) row.classList.add('diverges');
    append(row, el('div', { class: 'kind', title: 'seq ' + event.seq + ' · ' + time(event.time_us) }, event.kind.replace(/_/g, ' ')));
    const body = el('div');
    append(row, body);
    switch (event.kind) {
      case 'run_started': {
        append(body, el('div', { class: 'kv' },
          fact('run', event.run), fact('agent', (data.agent || {}).name + ((data.agent || {}).version ? ' v' + data.agent.version : '')),
          fact('model', (data.model || {}).provider + '/' + (data.model || {}).name), fact('policy', (data.policy || {}).name),
          fact('acts for', data.actor), fact('route', data.route)));
        append(body, el('div', null, el('span', { class: 'muted' }, 'goal '), data.goal));
        const limits = data.limits || {};
        const limitText = Object.keys(limits).map(function (key) { return key.replace(/_/g, ' ') + ' ' + limits[key]; }).join(', ');
        if (limitText) append(body, el('div', null, el('span', { class: 'muted' }, 'limits '), limitText));
        append(body, refList('tools', data.tools, function (tool) {
          return [el('code', null, tool.name), ' ', badge(tool.side_effect || 'read', tool.side_effect === 'write' ? 'warn' : ''),
            tool.server ? ' mcp ' + tool.server : '', ' ', el('span', { class: 'muted' }, tool.description || '')];
        }));
        append(body, refList('tool servers', data.tool_servers, function (server) {
          return server.name + ': ' + server.kind + ' ' + server.server_name + ' ' + (server.server_version || '');
        }));
        if (data.source) append(body, el('div', null, el('span', { class: 'muted' }, 'imported from '), data.source.format + ' ' + data.source.file + (data.source.id ? ' (' + data.source.id + ')' : '')));
        break;
      }
      case 'context_built': {
        append(body, el('div', { class: 'kv' }, fact('~tokens', data.token_estimate),
          fact('tools shown', (data.tools_disclosed || []).join(', ') || 'none')));
        if (data.state_summary) append(body, el('div', { class: 'muted' }, data.state_summary));
        const describe = function (item) {
          return [el('code', null, item.id), item.summary ? ': ' + item.summary : '', item.content_hash ? [' ', contentLink(item.content_hash, context)] : null];
        };
        append(body, refList('included observations', data.observations, describe));
        append(body, refList('evidence', data.evidence, describe));
        append(body, refList('memory', data.memory, describe));
        append(body, refList('omitted', data.omitted, function (item) {
          return [el('code', null, item.id), ' ', badge(item.reason, 'warn'), item.detail ? ' ' + item.detail : ''];
        }));
        if (data.prompt_hash) append(body, el('div', null, el('span', { class: 'muted' }, 'instructions '), contentLink(data.prompt_hash, context)));
        break;
      }
      case 'decision_made': {
        const usage = data.usage;
        append(body, el('div', { class: 'kv' },
          usage ? fact('tokens', usage.input + ' in + ' + usage.output + ' out') : null,
          data.latency_us !== undefined ? fact('latency', duration(data.latency_us)) : null,
          data.ttft_us !== undefined ? fact('first token', duration(data.ttft_us)) : null,
          data.cost_usd !== undefined ? fact('cost', money(data.cost_usd)) : null,
          data.format ? fact('format', data.format) : null));
        for (const attempt of data.attempts || []) {
          append(body, el('div', { class: 'problem' }, 'retried: ' + (attempt.status ? 'HTTP ' + attempt.status + ' ' : '') + attempt.error + ', waited ' + attempt.waited_ms + ' ms'));
        }
        const decision = data.decision;
        if (data.invalid) {
          append(body, el('div', { class: 'problem' }, 'REJECTED ', badge(data.invalid.kind, 'bad'), ' ', data.invalid.message));
        } else if (decision && decision.type === 'tool_calls') {
          for (const call of decision.calls || []) {
            append(body, el('div', null, el('code', null, call.id), ' → ', el('b', { class: 'tool' }, call.name)));
            append(body, callArguments(call.id, call.arguments, context));
          }
        } else if (decision) {
          const text = decision.text !== undefined ? decision.text : (decision.answer !== undefined ? decision.answer : (decision.question || decision.reason || ''));
          append(body, el('div', null, badge(decision.type.replace(/_/g, ' ')), ' ', typeof text === 'string' ? text : oneLine(decision)));
        }
        append(body, el('details', null, el('summary', null, 'raw reply (' + size((data.raw || '').length) + ')'), el('pre', null, data.raw || '')));
        break;
      }
      case 'verdict_given':
        append(body, el('div', null, el('code', null, data.call_id), ' ', el('b', { class: 'tool' }, data.tool), ' ',
          badge(data.verdict), data.rule ? [' rule ', el('code', null, data.rule)] : null, data.reason ? ': ' + data.reason : ''));
        break;
      case 'tool_intended':
        append(body, el('div', null, el('code', null, data.call_id), ' ', el('b', { class: 'tool' }, data.tool), ' attempt ' + data.attempt));
        append(body, callArguments(data.call_id, data.arguments, context));
        break;
      case 'tool_completed': {
        append(body, el('div', null, el('code', null, data.call_id), ' ', el('b', { class: 'tool' }, data.tool), ' attempt ' + data.attempt + ' ',
          badge(data.status, data.status === 'ok' ? 'ok' : 'bad'), ' in ' + duration(data.duration_us),
          data.is_retryable ? ' (retryable)' : ''));
        if (data.error) append(body, el('div', { class: 'problem' }, data.error));
        if (data.output !== undefined) append(body, payload(data.output));
        if (data.content_hash) append(body, contentLink(data.content_hash, context));
        if (data.stderr) append(body, el('details', null, el('summary', null, 'stderr (' + size(data.stderr.length) + ')'), el('pre', null, data.stderr)));
        break;
      }
      case 'approval_recorded':
        append(body, el('div', null, el('code', null, data.call_id), ' ', badge(data.granted ? 'granted' : 'refused', data.granted ? 'ok' : 'bad'),
          data.approver ? ' by ' + data.approver : '', data.reason ? ': ' + data.reason : ''));
        break;
      case 'step_ended':
        if (digest) {
          append(body, digest.match
            ? el('div', null, badge('✔ digest', 'ok'), ' ', el('span', { class: 'mono muted' }, data.state_digest.slice(0, 23) + '… matches the rebuilt state'))
            : el('div', { class: 'problem' }, '✘ recorded ' + digest.recorded.slice(0, 23) + '…, rebuilt ' + digest.computed.slice(0, 23) + '…'));
        } else {
          append(body, el('span', { class: 'mono muted' }, data.state_digest));
        }
        break;
      case 'content_stored':
        append(body, contentLink(data.hash, context));
        break;
      case 'run_forked':
        append(body, el('div', null, 'fork of run ', el('code', null, data.parent_run_id), ' after its step ' + data.step,
          data.parent_log ? [' (', el('code', null, data.parent_log), ')'] : null));
        if (data.model) append(body, el('div', { class: 'kv' }, fact('goes on with', (data.agent || {}).name), fact('model', data.model.provider + '/' + data.model.name)));
        append(body, refList('edits', data.edits, function (edit) {
          return [badge(edit.kind.replace(/_/g, ' '), 'warn'), ' ', edit.call_id ? el('code', null, edit.call_id) : null,
            edit.step !== undefined ? ' step ' + edit.step : '', edit.tool ? el('code', null, edit.tool) : null,
            edit.text !== undefined ? ' ' + edit.text : '', edit.value !== undefined ? [' ', payload(edit.value)] : null];
        }));
        if (!(data.edits || []).length) append(body, el('div', { class: 'muted' }, 'no edit: the same run, continued live'));
        break;
      case 'user_turn':
        append(body, el('div', null, badge('user turn ' + data.turn, 'warn'), ' ', el('span', { class: 'muted' }, data.source),
          data.ends ? [' ', badge('ends: ' + data.ends, 'warn')] : null));
        if (data.text) append(body, el('div', { class: 'said' }, data.text));
        if (data.usage) append(body, el('div', { class: 'muted' }, 'the user\'s model: ' + data.usage.input + '+' + data.usage.output + ' tokens'));
        break;
      case 'run_stopped':
        append(body, el('div', null, badge(data.reason, goodStops.indexOf(data.reason) >= 0 ? 'ok' : 'bad'),
          data.limit ? [' limit ', el('b', null, data.limit), ' fired'] : null, data.error ? ' — ' + data.error : ''));
        if (data.answer !== undefined) append(body, el('div', null, el('span', { class: 'muted' }, 'answer '), data.answer));
        break;
      default:
        append(body, payload(data));
    }
    return row;
  }

  // What a step's row in the navigation says: its tools, or its stop.
  function stepSketch(step) {
    if (step.outline) return step.sketch || '';
    const parts = [];
    for (const event of step.events || []) {
      const data = event.data || {};
      if (event.kind === 'decision_made') {
        if (data.invalid) parts.push('rejected');
        else if (data.decision && data.decision.type === 'tool_calls') for (const call of data.decision.calls || []) parts.push(call.name);
        else if (data.decision) parts.push(data.decision.type);
      } else if (event.kind === 'run_started') parts.push('start');
      else if (event.kind === 'run_stopped') parts.push('stop: ' + data.reason);
      else if (event.kind === 'approval_recorded') parts.push(data.granted ? 'approved' : 'refused');
      else if (event.kind === 'run_forked') parts.push('fork');
      else if (event.kind === 'user_turn') parts.push('user turn ' + data.turn);
    }
    return parts.join(', ');
  }

  // What search looks through for a step: tool names and arguments.
  function searchText(step) {
    if (step.outline) return step.search || '';
    const parts = [];
    for (const event of step.events || []) {
      const data = event.data || {};
      if (data.tool) parts.push(data.tool);
      if (data.arguments !== undefined) parts.push(oneLine(data.arguments));
      if (event.kind === 'decision_made' && data.decision && data.decision.calls) {
        for (const call of data.decision.calls) parts.push(call.name, oneLine(call.arguments));
      }
    }
    return parts.join('\n').toLowerCase();
  }

  function contentsOf(doc) {
    const contents = {};
    for (const step of doc.steps || []) {
      for (const event of step.events || []) if (event.kind === 'content_stored') contents[event.data.hash] = event.data;
    }
    return contents;
  }

  // ---------------------------------------------------------------- a run
  // The run viewer: summary, chart, search, and the steps a page at a time with a virtualised
  // list of every step beside them.
  function RunViewer(doc, options) {
    this.doc = doc;
    this.prefix = options.prefix || '';
    this.steps = doc.steps || [];
    this.byNumber = {};
    this.steps.forEach(function (step, index) { this.byNumber[step.step] = index; }, this);
    this.problemIndexes = [];
    this.steps.forEach(function (step, index) { if (step.problems && step.problems.length) this.problemIndexes.push(index); }, this);
    this.sketches = this.steps.map(stepSketch);
    this.searchTexts = this.steps.map(searchText);
    this.matches = [];
    this.matchSet = new Set();
    this.current = -1;
    this.page = -1;
    this.pageSize = options.pageSize || 25;
    this.context = { prefix: this.prefix, contents: contentsOf(doc), highlight: options.highlight || null };
    this.root = el('div', {
      class: 'run-view', 'data-steps': this.steps.length, 'data-log': doc.log,
      'data-last-step': this.steps.length ? this.steps[this.steps.length - 1].step : ''
    });
  }

  RunViewer.prototype.draw = function () {
    const doc = this.doc;
    const summary = doc.summary || {};
    const final = doc.final_state || {};
    const verification = doc.verification || {};
    const self = this;
    append(this.root, el('h1', null, summary.agent ? 'Run of ' + summary.agent : 'Run ' + (doc.run_id || '')));
    append(this.root, el('div', { class: 'facts' },
      fact('log', doc.log), fact('run', doc.run_id), fact('model', summary.model),
      fact('steps', this.steps.length), fact('events', final.event_count),
      fact('stop', summary.stop_reason ? summary.stop_reason + (summary.limit ? ' (' + summary.limit + ')' : '') : 'none'),
      fact('tokens', final.input_tokens !== undefined ? (final.input_tokens + final.output_tokens) : undefined),
      fact('cost', final.cost_usd !== undefined ? money(final.cost_usd) : undefined),
      fact('duration', summary.duration_us !== undefined ? duration(summary.duration_us) : undefined)));
    if (summary.goal) append(this.root, el('div', null, el('span', { class: 'muted' }, 'goal '), summary.goal));
    if (summary.answer !== undefined) append(this.root, el('div', null, el('span', { class: 'muted' }, 'answer '), summary.answer));
    if (doc.fork) append(this.root, this.drawFork(doc.fork));
    if ((doc.forks || []).length) {
      append(this.root, el('div', { class: 'panel', id: this.prefix + 'forks' }, el('h3', null, 'Forks of this run'),
        el('ul', null, doc.forks.map(function (child) {
          return el('li', null, el('code', null, child.run_id), ' after step ' + child.step + ': ', el('code', null, 'agent-eval view ' + child.log));
        }))));
    }
    if (doc.error) {
      append(this.root, el('p', { class: 'error', id: this.prefix + 'log-error' }, 'The log could not be read to the end: ' + (doc.error.message || oneLine(doc.error)) +
        (doc.error.hint ? ' — ' + doc.error.hint : '') + '. The ' + this.steps.length + ' steps before the damage are shown.'));
    } else if ((verification.digest_mismatches || []).length) {
      append(this.root, el('p', { class: 'banner-bad' }, verification.digest_mismatches.length + ' of ' + verification.digests_checked +
        ' state digests do not match the rebuilt state: the log was written by code whose fold differs from this one.'));
    } else if (verification.partial) {
      // A long run's first part: the rest of the log is still being read (or its stream never
      // came), so nothing is known yet of its later digests, its end or a tear.
      append(this.root, el('p', { class: 'banner-warn', id: this.prefix + 'partial' }, 'Not verified yet: the first ' + this.steps.length +
        ' steps are read (' + (verification.digests_checked || 0) + ' state digests checked, all match); the rest of the log has not been read.'));
    } else if (verification.tear) {
      // Torn: what came after the cut was never seen, so the page is not a whole replay.
      append(this.root, el('p', { class: 'banner-bad', id: this.prefix + 'torn' }, 'The log is torn: ' + verification.tear +
        '. The ' + this.steps.length + ' steps before the cut are shown (' + (verification.digests_checked || 0) +
        ' state digests checked, all match); what came after was never seen — seal it with agent-eval log repair.'));
    } else {
      append(this.root, el('p', { class: 'banner-ok' }, '✔ replayed from the log alone; ' + (verification.digests_checked || 0) + ' state digests checked, all match the rebuilt state' +
        (verification.end_signed ? '; its end is signed' : '. Its end is unproven: the log is not signed, so a copy cut after an earlier stop would read the same')));
    }
    if ((summary.conversation || []).length) append(this.root, this.drawConversation(summary.conversation));
    append(this.root, this.drawSummary());
    append(this.root, this.drawToolbar());
    const layout = el('div', { class: 'layout' });
    append(layout, this.drawNavigation());
    this.pages = el('div', { class: 'pages' });
    this.pager = el('div', { class: 'pager' });
    append(layout, el('div', null, this.pager, this.pages));
    append(this.root, layout);
    if (!this.steps.length) append(this.pages, el('p', { class: 'muted' }, 'This log holds no complete step.'));
    setTimeout(function () { self.renderNavigation(); }, 0);
    return this.root;
  };

  // A fork's panel: its parent and step, the edits, and where it parts from the parent.
  RunViewer.prototype.drawFork = function (fork) {
    const panel = el('div', { class: 'panel fork', id: this.prefix + 'fork' });
    append(panel, el('h3', null, 'Fork of run ', el('code', null, fork.parent_run_id), ' after its step ' + fork.step));
    if (fork.parent_log) append(panel, el('div', null, el('span', { class: 'muted' }, 'parent '), el('code', null, 'agent-eval view ' + fork.parent_log)));
    append(panel, el('ul', null, (fork.edit_summaries || []).length
      ? fork.edit_summaries.map(function (text) { return el('li', null, text); })
      : el('li', { class: 'muted' }, 'no edit: the same run, continued live')));
    const diff = fork.diff;
    if (diff) {
      const first = diff.first_divergence;
      append(panel, first
        ? el('div', { class: 'problem' }, 'parts from the parent at step ' + (first.right_step !== undefined ? first.right_step : first.left_step) + ': ' + first.path,
          el('div', null, 'parent: ' + first.left), el('div', null, 'fork: ' + first.right))
        : el('div', null, badge('same trajectory', 'ok'), ' the same decisions, verdicts, results and stop as the parent'));
      append(panel, el('div', { class: 'muted' }, 'stop: parent ' + (diff.summary.left_stop || 'none') + ', fork ' + (diff.summary.right_stop || 'none')));
    } else if (fork.parent_missing) {
      append(panel, el('div', { class: 'muted' }, 'no diff against the parent: ' + fork.parent_missing));
    }
    return panel;
  };

  // A conversation as a chat: the user's turns and the agent's messages, the calls between them.
  RunViewer.prototype.drawConversation = function (items) {
    const panel = el('div', { class: 'panel chat', id: this.prefix + 'conversation' }, el('h3', null, 'Conversation'));
    for (const item of items) {
      if (item.calls) {
        append(panel, el('div', { class: 'chat-calls muted', 'data-turn': item.turn }, 'step ' + item.step + ': ',
          item.calls.map(function (call, index) {
            return [index ? ', ' : '', el('code', null, call.tool), ' ', badge(call.status, call.status === 'ok' ? 'ok' : 'bad')];
          })));
      } else {
        append(panel, el('div', { class: 'chat-line ' + item.speaker, 'data-turn': item.turn },
          el('div', { class: 'muted' }, (item.speaker === 'user' ? 'user, turn ' + item.turn + (item.source ? ' (' + item.source + ')' : '') : 'agent') +
            ' · step ' + item.step),
          el('div', null, item.text), item.ends ? el('div', null, badge('ends: ' + item.ends, 'warn')) : null));
      }
    }
    return panel;
  };

  RunViewer.prototype.drawSummary = function () {
    const summary = this.doc.summary || {};
    const panel = el('div', { class: 'panel summary' });
    const tools = summary.tools || [];
    if (tools.length) {
      append(panel, el('h3', null, 'Tools'));
      append(panel, el('table', { class: 'tools' },
        el('tr', null, ['tool', 'calls', 'executed', 'denied', 'attempts', 'failed', 'total', 'median', 'slowest'].map(function (name, index) {
          return el('th', { class: index ? 'num' : '' }, name);
        })),
        tools.map(function (tool) {
          return el('tr', { 'data-tool': tool.tool }, el('td', null, el('code', null, tool.tool)), el('td', { class: 'num' }, tool.calls),
            el('td', { class: 'num' }, tool.executed), el('td', { class: 'num' }, tool.denied), el('td', { class: 'num' }, tool.attempts),
            el('td', { class: 'num' }, tool.failed_attempts), el('td', { class: 'num' }, duration(tool.total_us)),
            el('td', { class: 'num' }, tool.p50_us === undefined ? '–' : duration(tool.p50_us)),
            el('td', { class: 'num' }, tool.max_us === undefined ? '–' : duration(tool.max_us)));
        })));
    }
    if (this.steps.length > 1) append(panel, this.drawChart());
    return panel;
  };

  // Tokens (and cost, when any) summed over the steps, from each step's state.
  RunViewer.prototype.drawChart = function () {
    const ns = 'http://www.w3.org/2000/svg';
    const width = 1000, height = 120, pad = 4;
    const tokens = this.steps.map(function (step) { const state = step.state || {}; return (state.input_tokens || 0) + (state.output_tokens || 0); });
    const costs = this.steps.map(function (step) { return (step.state || {}).cost_usd || 0; });
    // Both are sums so far: the last step holds the largest.
    const maxTokens = Math.max(1, tokens[tokens.length - 1]);
    const maxCost = costs[costs.length - 1];
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    svg.setAttribute('preserveAspectRatio', 'none');
    function line(values, max, cls) {
      const step = values.length > 1 ? (width - 2 * pad) / (values.length - 1) : 0;
      const stride = Math.max(1, Math.floor(values.length / 2000));
      const points = [];
      for (let index = 0; index < values.length; index += stride) {
        points.push((pad + index * step).toFixed(1) + ',' + (height - pad - (values[index] / max) * (height - 2 * pad)).toFixed(1));
      }
      const last = values.length - 1;
      points.push((pad + last * step).toFixed(1) + ',' + (height - pad - (values[last] / max) * (height - 2 * pad)).toFixed(1));
      const polyline = document.createElementNS(ns, 'polyline');
      polyline.setAttribute('points', points.join(' '));
      polyline.setAttribute('class', cls);
      append(svg, polyline);
    }
    const axis = document.createElementNS(ns, 'line');
    axis.setAttribute('x1', pad); axis.setAttribute('x2', width - pad); axis.setAttribute('y1', height - pad); axis.setAttribute('y2', height - pad);
    axis.setAttribute('class', 'axis');
    append(svg, axis);
    line(tokens, maxTokens, 'tokens');
    if (maxCost > 0) line(costs, maxCost, 'cost');
    return el('div', { class: 'chart' }, el('h3', null, 'Over the steps'),
      el('div', { class: 'legend' }, el('span', { class: 'tokens' }, 'tokens so far (up to ' + maxTokens + ')'),
        maxCost > 0 ? el('span', { class: 'cost' }, 'cost so far (up to ' + money(maxCost) + ')') : null,
        el('span', null, 'step ' + this.steps[0].step + ' → ' + this.steps[this.steps.length - 1].step)), svg);
  };

  RunViewer.prototype.drawToolbar = function () {
    const self = this;
    this.search = el('input', { type: 'search', placeholder: 'search tools and arguments  (/)', 'aria-label': 'search tools and arguments', class: 'search' });
    this.searchStatus = el('span', { class: 'muted search-status' });
    this.search.addEventListener('input', function () { self.runSearch(self.search.value); });
    this.search.addEventListener('keydown', function (event) {
      if (event.key === 'Enter') { event.preventDefault(); self.nextMatch(event.shiftKey ? -1 : 1); }
      if (event.key === 'Escape') self.search.blur();
    });
    this.jump = el('input', { type: 'number', class: 'jump', placeholder: 'step (g)', 'aria-label': 'jump to step', min: 0 });
    this.jump.addEventListener('keydown', function (event) {
      if (event.key === 'Enter') { event.preventDefault(); self.showStep(Number(self.jump.value)); self.jump.blur(); }
      if (event.key === 'Escape') self.jump.blur();
    });
    const problems = this.problemIndexes.length;
    return el('div', { class: 'toolbar' },
      el('button', { onclick: function () { self.move(-1); }, title: 'previous step (p)' }, '◀ step'),
      el('button', { onclick: function () { self.move(1); }, title: 'next step (n)' }, 'step ▶'),
      el('button', { class: 'next-problem', onclick: function () { self.nextProblem(1); }, title: 'next failure, denial or error (f)', disabled: problems ? null : 'disabled' },
        'next problem (' + problems + ')'),
      this.jump, this.search, this.searchStatus);
  };

  RunViewer.prototype.drawNavigation = function () {
    const self = this;
    this.viewport = el('div', { class: 'viewport' });
    this.rows = el('div', { class: 'rows' });
    this.rows.style.height = (this.steps.length * 24) + 'px';
    this.rows.style.position = 'relative';
    append(this.viewport, this.rows);
    this.viewport.addEventListener('scroll', function () { self.renderNavigation(); });
    this.rows.addEventListener('click', function (event) {
      const row = event.target.closest('.row');
      if (row) self.showIndex(Number(row.dataset.index));
    });
    const problems = this.problemIndexes.length;
    return el('nav', { class: 'steps-nav' },
      el('div', { class: 'head' }, this.steps.length + ' steps' + (problems ? ', ' + problems + ' with problems' : '')), this.viewport);
  };

  // Draws only the rows in view (and a few around them): a long run stays quick to scroll.
  RunViewer.prototype.renderNavigation = function () {
    if (!this.rows) return;
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / 24) - 10);
    const last = Math.min(this.steps.length, Math.ceil((top + height) / 24) + 10);
    clear(this.rows);
    for (let index = first; index < last; index++) {
      const step = this.steps[index];
      const classes = ['row'];
      if (index === this.current) classes.push('current');
      if (step.problems && step.problems.length) classes.push('problem');
      if (this.matchSet.has(index)) classes.push('match');
      const row = el('div', { class: classes.join(' '), 'data-index': index, 'data-step': step.step, title: this.sketches[index] },
        (step.problems && step.problems.length ? '⚠ ' : '') + step.step + ' · ' + this.sketches[index]);
      row.style.top = (index * 24) + 'px';
      append(this.rows, row);
    }
  };

  RunViewer.prototype.renderPage = function (page) {
    if (page === this.page) return;
    this.page = page;
    clear(this.pages);
    const start = page * this.pageSize;
    const end = Math.min(this.steps.length, start + this.pageSize);
    // A long run's page (agent-eval serve) holds outlines past its first steps: their events are
    // fetched when the reader reaches them, and the page drawn again.
    const outlined = [];
    for (let index = start; index < end; index++) if (this.steps[index].outline) outlined.push(index);
    if (outlined.length && servedPages) {
      append(this.pages, el('p', { class: 'muted loading-steps' }, 'loading steps ' + this.steps[outlined[0]].step + '–' + this.steps[outlined[outlined.length - 1]].step + '…'));
      this.fetchSteps(outlined, page);
      return;
    }
    for (let index = start; index < end; index++) append(this.pages, stepCard(this.steps[index], this.context));
    clear(this.pager);
    const pages = Math.ceil(this.steps.length / this.pageSize);
    if (pages > 1) {
      const self = this;
      append(this.pager, el('button', { onclick: function () { self.showIndex(Math.max(0, start - self.pageSize)); }, disabled: page === 0 ? 'disabled' : null }, '◀ page'));
      append(this.pager, el('span', null, 'steps ' + this.steps[start].step + '–' + this.steps[end - 1].step + ' of ' + this.steps.length + ' (page ' + (page + 1) + ' of ' + pages + ')'));
      append(this.pager, el('button', { onclick: function () { self.showIndex(Math.min(self.steps.length - 1, end)); }, disabled: page === pages - 1 ? 'disabled' : null }, 'page ▶'));
    }
  };

  // Fetches the events of the outlined steps at `indexes` and draws `page` again with them.
  RunViewer.prototype.fetchSteps = function (indexes, page) {
    const self = this;
    const first = this.steps[indexes[0]].step, last = this.steps[indexes[indexes.length - 1]].step;
    fetch(pageLink('/api/run/steps', [['log', this.doc.log], ['from', first], ['to', last]])).then(function (response) {
      return response.json().then(function (body) { if (!response.ok) throw new Error(body.error || response.status); return body; });
    }).then(function (body) {
      for (const step of body.steps || []) {
        const index = self.byNumber[step.step];
        if (index !== undefined && self.steps[index].outline) self.steps[index] = step;
      }
      for (const step of body.steps || []) {
        for (const event of step.events || []) if (event.kind === 'content_stored') self.context.contents[event.data.hash] = event.data;
      }
      if (self.page !== page) return;
      const current = self.current;
      self.page = -1;
      self.renderPage(page);
      if (current >= 0 && Math.floor(current / self.pageSize) === page) self.showIndex(current, { scroll: false, updateHash: false });
      document.body.dataset.stepsFetched = String((Number(document.body.dataset.stepsFetched) || 0) + (body.steps || []).length);
    }).catch(function (error) {
      if (self.page !== page) return;
      clear(self.pages);
      append(self.pages, el('p', { class: 'error' }, 'the steps could not be fetched: ' + error.message + ' — reload the page'));
    });
  };

  RunViewer.prototype.showStep = function (number) {
    const index = this.byNumber[number];
    if (index === undefined) {
      this.flash('no step ' + number + ' in this run (steps ' + this.steps[0].step + '–' + this.steps[this.steps.length - 1].step + ')');
      return false;
    }
    this.showIndex(index);
    return true;
  };

  RunViewer.prototype.showIndex = function (index, options) {
    if (!this.steps.length) return;
    index = Math.max(0, Math.min(this.steps.length - 1, index));
    this.renderPage(Math.floor(index / this.pageSize));
    const previous = this.pages.querySelector('.step.current');
    if (previous) previous.classList.remove('current');
    this.current = index;
    const step = this.steps[index];
    const card = document.getElementById(this.prefix + 'step-' + step.step);
    if (card) {
      card.classList.add('current');
      if (!options || options.scroll !== false) card.scrollIntoView({ block: 'start' });
    }
    const hash = '#' + this.prefix + 'step-' + step.step;
    if (location.hash !== hash && (!options || options.updateHash !== false)) history.replaceState(null, '', hash);
    // Keep the current row in view in the navigation.
    const rowTop = index * 24;
    if (rowTop < this.viewport.scrollTop || rowTop > this.viewport.scrollTop + this.viewport.clientHeight - 24) {
      this.viewport.scrollTop = Math.max(0, rowTop - 120);
    }
    this.renderNavigation();
    document.body.dataset.currentStep = String(step.step);
  };

  RunViewer.prototype.move = function (delta) { this.showIndex(this.current < 0 ? 0 : this.current + delta); };

  RunViewer.prototype.nextProblem = function (direction) {
    const list = this.problemIndexes;
    if (!list.length) { this.flash('no failures, denials or errors in this run'); return; }
    let target = direction > 0 ? list.find(function (index) { return index > this.current; }, this) : undefined;
    if (direction < 0) for (const index of list) if (index < this.current) target = index;
    if (target === undefined) target = direction > 0 ? list[0] : list[list.length - 1];
    this.showIndex(target);
  };

  RunViewer.prototype.runSearch = function (query) {
    const needle = query.trim().toLowerCase();
    this.matches = [];
    if (needle) this.searchTexts.forEach(function (text, index) { if (text.indexOf(needle) >= 0) this.matches.push(index); }, this);
    this.matchSet = new Set(this.matches);
    this.searchStatus.textContent = needle ? (this.matches.length ? this.matches.length + ' steps match — Enter for the next' : 'no step calls or passes that') : '';
    this.searchStatus.dataset.matches = needle ? String(this.matches.length) : '';
    this.renderNavigation();
  };

  RunViewer.prototype.nextMatch = function (direction) {
    if (!this.matches.length) return;
    let target;
    if (direction > 0) target = this.matches.find(function (index) { return index > this.current; }, this);
    else for (const index of this.matches) if (index < this.current) target = index;
    if (target === undefined) target = direction > 0 ? this.matches[0] : this.matches[this.matches.length - 1];
    this.showIndex(target);
  };

  RunViewer.prototype.flash = function (message) {
    this.searchStatus.textContent = message;
  };

  RunViewer.prototype.key = function (event) {
    switch (event.key) {
      case 'n': case 'j': this.move(1); return true;
      case 'p': case 'k': this.move(-1); return true;
      case 'f': this.nextProblem(1); return true;
      case 'F': this.nextProblem(-1); return true;
      case '/': this.search.focus(); return true;
      case 'g': this.jump.focus(); this.jump.select(); return true;
      default: return false;
    }
  };

  // ---------------------------------------------------------------- pages
  let activeViewer = null;
  // Set on a page `agent-eval serve` served: a run not embedded is linked to its own page there.
  let servedPages = false;
  function runPageLink(log, step) { return '/run?log=' + encodeURIComponent(log) + (step !== undefined ? '#step-' + step : ''); }

  function drawRunPage(app, data) {
    if (data.live) { new LiveRun(app, data).start(); return; }
    const viewer = new RunViewer(data.run, { prefix: '' });
    append(app, viewer.draw());
    activeViewer = viewer;
    const match = /^#step-(-?\d+)$/.exec(location.hash);
    if (match && viewer.showStep(Number(match[1]))) return;
    viewer.showIndex(0, { scroll: false, updateHash: false });
  }

  // ---------------------------------------------------------------- served pages (agent-eval serve)
  // A page `agent-eval serve` served may ask its own origin for more: the runs list's next page,
  // a run's updates as its log grows (server-sent events), and answers to approvals.

  function servedNavigation(data) {
    const bar = document.querySelector('header.bar');
    servedPages = true;
    const nav = el('nav', { class: 'served-nav' }, el('a', { href: '/' }, 'Runs'), el('a', { href: '/suites' }, 'Suites'),
      el('a', { href: '/approvals' }, 'Approvals'));
    bar.insertBefore(nav, document.getElementById('keys-hint'));
  }

  function pageLink(path, pairs) {
    const query = new URLSearchParams();
    for (const pair of pairs) query.append(pair[0], pair[1]);
    const text = query.toString();
    return path + (text ? '?' + text : '');
  }

  // A run whose log may still grow: drawn as any run, then each update merged in by step number
  // (a step sent again replaces the one shown, so nothing shows twice) and drawn again.
  function LiveRun(app, data) {
    this.app = app;
    this.data = data;
    this.doc = data.run;
    this.status = data.live.status || {};
    this.approvals = data.approvals || [];
    this.cursor = data.live.cursor;
    this.updates = 0;
    this.pending = false;
  }

  LiveRun.prototype.start = function () {
    const self = this;
    this.draw(true);
    const source = new EventSource(pageLink('/events/run', [['log', this.data.live.log], ['after', this.cursor], ['run', this.data.live.run || '']]));
    source.addEventListener('update', function (event) { self.merge(JSON.parse(event.data)); });
    source.addEventListener('open', function () { self.connected(true); });
    source.addEventListener('error', function () { self.connected(false); });
    this.source = source;
    // What the page holds, for whoever drives it (scripts/serve_browser.py).
    window.agentEvalLive = this;
  };

  // The connection came or went: the browser reconnects by itself, from the last update's id.
  LiveRun.prototype.connected = function (isConnected) {
    this.isConnected = isConnected;
    document.body.dataset.liveConnected = String(isConnected);
    if (this.banner) this.banner.textContent = this.statusText();
  };

  LiveRun.prototype.statusText = function () {
    const state = this.status.state || 'running';
    return (state === 'running' ? '● live — ' : state === 'stopped' ? '■ ' : state === 'loading' ? '… ' : '⚠ ') + (this.status.text || state) +
      (this.isConnected === false ? ' (the server is away: reconnecting…)' : '');
  };

  LiveRun.prototype.merge = function (update) {
    // Another run now at this log's path: the page starts again.
    if (update.reset) this.doc.steps = [];
    if (update.csrf && this.data.served) this.data.served.csrf = update.csrf;
    const steps = this.doc.steps || (this.doc.steps = []);
    const index = {};
    steps.forEach(function (step, position) { index[step.step] = position; });
    for (const step of update.steps || []) {
      if (index[step.step] !== undefined) steps[index[step.step]] = step;
      else { index[step.step] = steps.length; steps.push(step); }
    }
    steps.sort(function (a, b) { return a.step - b.step; });
    // The head's members: the first update of a stream carries them all (head_whole), later ones
    // only those that changed, and the names of those dropped.
    const head = update.head;
    if (head) {
      for (const key of Object.keys(head)) this.doc[key] = head[key];
      if (update.head_whole && !head.error) delete this.doc.error;
    }
    for (const key of update.head_removed || []) delete this.doc[key];
    // A reader at the last step drawn while a long run's steps were coming is not following its end.
    if (this.status.state === 'loading') this.keepsPlace = true;
    // Only the last of a run of updates carries the status and the waiting calls.
    this.status = update.status || this.status;
    if (update.approvals) this.approvals = update.approvals;
    this.cursor = update.cursor || this.cursor;
    this.updates += 1;
    // Drawn once per frame however many updates came; while a long run's steps are still coming
    // (updates without the state), at most about twice a second: each draw lays out every step.
    if (this.pending) return;
    this.pending = true;
    const self = this;
    const draw = function () { requestAnimationFrame(function () { self.pending = false; self.draw(false); }); };
    if (this.status.state === 'loading' && !update.status) setTimeout(draw, 400); else draw();
  };

  LiveRun.prototype.draw = function (first) {
    const previous = activeViewer && activeViewer.steps ? activeViewer : null;
    const shown = previous && previous.current >= 0 ? previous.steps[previous.current].step : undefined;
    const atEnd = previous ? previous.current === previous.steps.length - 1 : false;
    clear(this.app);
    const state = this.status.state || 'running';
    this.banner = el('p', { class: 'live-status ' + (state === 'running' || state === 'loading' ? 'banner-warn' : state === 'stopped' ? 'banner-ok' : 'banner-bad'), id: 'live-status' },
      this.statusText());
    append(this.app, this.banner);
    if (this.approvals.length) append(this.app, approvalsPanel(this.data.live.log, this.approvals, this.data.served));
    const fork = this.doc.fork;
    if (fork && fork.parent_log) {
      append(this.app, el('p', null, el('a', { href: pageLink('/compare', [['a', fork.parent_log], ['b', this.doc.log]]), id: 'compare-parent' }, 'compare with its parent')));
    }
    const viewer = new RunViewer(this.doc, { prefix: '' });
    append(this.app, viewer.draw());
    activeViewer = viewer;
    const body = document.body.dataset;
    let events = 0;
    for (const step of this.doc.steps || []) events += (step.events || []).length;
    body.liveSteps = String((this.doc.steps || []).length);
    body.liveEvents = String(events);
    body.liveState = state;
    body.liveCursor = this.cursor || '';
    body.liveUpdates = String(this.updates);
    body.liveApprovals = String(this.approvals.length);
    if (first) {
      // What the page was first drawn with (a long run's: its first steps, while the rest load).
      body.liveFirstState = state;
      body.liveFirstSteps = body.liveSteps;
      const match = /^#step-(-?\d+)$/.exec(location.hash);
      const asked = match ? Number(match[1]) : undefined;
      // A long run's later steps come over the stream: the step asked for is shown when it comes.
      if (asked !== undefined && this.status.state === 'loading' && viewer.byNumber[asked] === undefined) this.wanted = asked;
      else if (asked !== undefined && viewer.showStep(asked)) return;
      viewer.showIndex(0, { scroll: false, updateHash: false });
      this.firstShown = viewer.steps.length ? viewer.steps[0].step : undefined;
    } else if (this.wanted !== undefined && shown === this.firstShown &&
      (viewer.byNumber[this.wanted] !== undefined || state !== 'loading')) {
      // The step the address asked for came (or the run is read, and it has none: said so).
      if (!viewer.showStep(this.wanted) && shown !== undefined && viewer.byNumber[shown] !== undefined) {
        viewer.showIndex(viewer.byNumber[shown], { scroll: false, updateHash: false });
      }
      this.wanted = undefined;
    } else if ((atEnd && !this.keepsPlace) || shown === undefined) {
      // Following the end: the newest step.
      viewer.showIndex(viewer.steps.length - 1, { scroll: false, updateHash: false });
    } else if (viewer.byNumber[shown] !== undefined) {
      viewer.showIndex(viewer.byNumber[shown], { scroll: false, updateHash: false });
    }
    // The reader went elsewhere before the step the address asked for came: theirs wins.
    if (!first && this.wanted !== undefined && shown !== this.firstShown) this.wanted = undefined;
    if (!first) this.keepsPlace = false;
  };

  // The calls waiting for a person in the run writing `log`, each with approve and deny.
  function approvalsPanel(log, calls, served) {
    const panel = el('div', { class: 'panel approvals' }, el('h3', null, 'Waiting for approval'));
    const who = el('input', { type: 'text', class: 'approver', value: (served && served.approver) || '', 'aria-label': 'approver', placeholder: 'who answers' });
    append(panel, el('div', { class: 'muted' }, 'answering as ', who));
    for (const call of calls) {
      const reason = el('input', { type: 'text', class: 'reason', placeholder: 'why (recorded with the answer)', 'aria-label': 'reason' });
      const outcome = el('span', { class: 'outcome muted' });
      function send(granted) {
        outcome.textContent = 'sending…';
        fetch('/api/approvals', {
          method: 'POST', credentials: 'same-origin',
          headers: { 'content-type': 'application/json', 'x-agent-eval-csrf': (served && served.csrf) || '' },
          body: JSON.stringify({ log: log, call: call.call_id, granted: granted, approver: who.value, reason: reason.value })
        }).then(function (response) {
          return response.json().then(function (body) { return { status: response.status, body: body }; });
        }).then(function (answer) {
          outcome.textContent = answer.status === 200 ? (granted ? 'approved' : 'denied') + ' by ' + answer.body.approver
            : answer.status === 409 ? 'someone else answered first: ' + answer.body.error : 'not taken: ' + answer.body.error;
          outcome.dataset.status = String(answer.status);
        }).catch(function (error) { outcome.textContent = 'not sent: ' + error; });
      }
      append(panel, el('div', { class: 'approval', 'data-call': call.call_id },
        el('code', null, call.call_id), ' ', el('b', null, call.tool), ' ', el('code', { class: 'arguments' }, oneLine(call.arguments)),
        call.rule ? el('span', { class: 'muted' }, ' rule ' + call.rule) : null,
        call.reason ? el('span', { class: 'muted' }, ' — ' + call.reason) : null,
        el('div', null, reason,
          el('button', { class: 'approve', onclick: function () { send(true); } }, 'Approve'),
          el('button', { class: 'deny', onclick: function () { send(false); } }, 'Deny'), outcome)));
    }
    return panel;
  }

  function drawApprovalsPage(app, data) {
    append(app, el('h1', null, 'Calls waiting for approval'));
    if (data.error) { append(app, el('p', { class: 'error', id: 'approvals-error' }, data.error)); return; }
    const waiting = data.waiting || [];
    if (!waiting.length) append(app, el('p', { class: 'muted', id: 'no-approvals' }, 'No call waits for a person in the runs the catalog has as running.'));
    for (const run of waiting) {
      append(app, el('h2', null, el('a', { href: run.page }, (run.agent || 'run') + ' ' + (run.run_id || '')), ' ', el('code', { class: 'muted' }, run.log)));
      append(app, approvalsPanel(run.log, run.calls, data.served));
    }
    document.body.dataset.approvals = String(waiting.reduce(function (sum, run) { return sum + run.calls.length; }, 0));
  }


  // Suite runs newest first, each linked to its report; a case's history by its id.
  function drawSuitesPage(app, data) {
    append(app, el('h1', null, 'Suite runs' + (data.branch ? ' on ' + data.branch : '')));
    const caseInput = el('input', { type: 'text', name: 'id', placeholder: 'case id', 'aria-label': 'case id' });
    append(app, el('form', { action: '/case', method: 'get', class: 'filters' }, el('label', null, 'a case\'s history ', caseInput), el('button', { type: 'submit' }, 'Show')));
    if (data.error) { append(app, el('p', { class: 'error' }, data.error)); return; }
    const rows = data.suite_runs || [];
    if (!rows.length) { append(app, el('p', { class: 'muted', id: 'no-suites' }, 'The catalog holds no suite run: agent-eval run records one.')); return; }
    append(app, el('table', { class: 'runs', id: 'suites' },
      el('thead', null, el('tr', null, ['suite run', 'started', 'commit', 'branch', 'runner', 'cases', 'passed', 'failed', 'could not run', 'took'].map(function (name) { return el('th', null, name); }))),
      el('tbody', null, rows.map(function (suite) {
        return el('tr', { class: 'suite-row' },
          el('td', null, el('a', { href: '/suite?id=' + suite.suite_run, class: 'suite-link' }, '#' + suite.suite_run), suite.shard ? ' (shard ' + suite.shard + ')' : ''),
          el('td', null, time(suite.started_at_us)), el('td', { class: 'mono' }, (suite.git_commit || '').slice(0, 12)),
          el('td', null, suite.git_branch ? el('a', { href: pageLink('/suites', [['branch', suite.git_branch]]) }, suite.git_branch) : ''),
          el('td', null, suite.ci_job && /^https?:\/\//.test(suite.ci_job) ? el('a', { href: suite.ci_job, rel: 'noreferrer' }, suite.runner || 'job') : (suite.runner || '')),
          el('td', { class: 'num' }, suite.cases), el('td', { class: 'num' }, suite.passed),
          el('td', { class: 'num' }, suite.failed ? badge(String(suite.failed), 'bad') : '0'), el('td', { class: 'num' }, suite.errors ? badge(String(suite.errors), 'warn') : '0'),
          el('td', { class: 'num' }, duration((suite.duration_ms || 0) * 1000)));
      }))));
    if (data.next) append(app, el('p', null, el('a', { href: pageLink('/suites', (data.branch ? [['branch', data.branch]] : []).concat([['before', data.next]])), id: 'older' }, 'older suite runs')));
  }

  // A case over its suite runs: outcome per commit, pass rate, flakiness, its quarantine, and
  // its newest result that did not pass, with each failure linked to its run's step.
  function drawCasePage(app, data) {
    const history = data.history || {};
    append(app, el('h1', null, 'Case ', el('code', null, data.case_id)));
    append(app, el('div', { class: 'facts' }, fact('history', data.sentence), history.flaky ? badge('flaky', 'flaky') : badge(history.passed === history.suite_runs ? 'stable pass' : 'not flaky', 'ok')));
    if (history.last_change) append(app, el('p', { class: 'banner-warn' }, history.last_change));
    const q = data.quarantine;
    if (q) append(app, el('p', { class: q.expired ? 'banner-bad' : 'banner-warn', id: 'quarantine' }, (q.expired ? 'quarantine expired: ' : 'quarantined: ') + 'owner ' + q.owner + ', until ' + q.until + ': ' + q.reason));
    append(app, el('table', { class: 'runs', id: 'history' },
      el('thead', null, el('tr', null, ['suite run', 'started', 'commit', 'branch', 'runner', 'outcome', 'passed', 'stability'].map(function (name) { return el('th', null, name); }))),
      el('tbody', null, (history.history || []).map(function (entry) {
        return el('tr', null, el('td', null, el('a', { href: '/suite?id=' + entry.suite_run }, '#' + entry.suite_run)), el('td', null, time(entry.started_at_us)),
          el('td', { class: 'mono' }, (entry.git_commit || '').slice(0, 12)), el('td', null, entry.git_branch || ''), el('td', null, entry.runner || ''),
          el('td', null, badge(entry.outcome)), el('td', { class: 'num' }, entry.passed_runs + '/' + entry.runs + ' (' + Math.round((entry.pass_rate || 0) * 100) + '%)'),
          el('td', null, entry.stability));
      }))));
    if (data.last_failure) {
      append(app, el('h2', null, 'Newest result that did not pass (suite run #' + data.last_failure_suite_run + ')'));
      append(app, el('div', { class: 'panel', id: 'last-failure' }, caseDetail(data.last_failure, {})));
    }
  }

  // A policy's judgement of every call of the runs a filter selects, as `agent-eval audit` gives it.
  function drawAuditPage(app, data) {
    append(app, el('h1', null, 'Audit by ', el('code', null, data.policy || '')));
    if (data.error) { append(app, el('p', { class: 'error', id: 'audit-error' }, data.error)); return; }
    const logs = data.logs || [];
    let flagged = 0;
    for (const log of logs) for (const finding of log.findings || []) if (finding.verdict !== 'allow') flagged += 1;
    append(app, el('p', { class: data.violations || (data.misspelt || []).length || data.unreadable ? 'banner-bad' : 'banner-ok', id: 'audit-verdict' },
      logs.length + ' runs audited; ' + (data.violations || 0) + ' calls ran that the policy would not have allowed; ' + flagged + ' the policy would deny or hold' +
      (data.unreadable ? '; ' + data.unreadable + ' could not be read whole' : '')));
    for (const problem of data.misspelt || []) append(app, el('p', { class: 'error' }, problem));
    for (const note of data.unmet || []) append(app, el('p', { class: 'muted' }, 'note: ' + note));
    if (data.left_out) append(app, el('p', { class: 'banner-warn' }, 'only the newest runs were audited: narrow the filters, or run agent-eval audit'));
    for (const log of logs) {
      const findings = (log.findings || []).filter(function (finding) { return finding.verdict !== 'allow'; });
      if (!findings.length && !log.error && !log.tear) continue;
      append(app, el('h3', null, el('a', { href: log.page }, log.log)));
      if (log.error) append(app, el('p', { class: 'problem' }, log.error));
      if (log.tear) append(app, el('p', { class: 'problem' }, 'torn: ' + log.tear));
      for (const finding of findings) {
        append(app, el('div', { class: 'finding' }, badge(finding.verdict, finding.violation ? 'bad' : 'warn'), ' ',
          el('a', { href: runPageLink(log.log, finding.step) }, 'step ' + finding.step), ' ', el('b', null, finding.tool), ' ', el('code', null, oneLine(finding.arguments)),
          el('span', { class: 'muted' }, ' rule ' + (finding.rule || 'default') + (finding.reason ? ': ' + finding.reason : '') + (finding.executed ? ' — ran' : ' — did not run') + (finding.approved ? ', approved by a person' : ''))));
      }
    }
  }

  // The runs list: the filters of `agent-eval runs` in a form whose address holds them, the rows
  // newest first a page at a time, fetched again when the catalog takes in changed logs.
  function drawRunsPage(app, data) {
    const repeatable = { tool: true, 'not-tool': true, stop: true, status: true };
    const given = {};
    for (const pair of data.filters || []) (given[pair[0]] = given[pair[0]] || []).push(pair[1]);
    const hints = {
      tool: 'refund_order, lookup_order', 'not-tool': 'tools that never ran', stop: 'success, running (no stop)…', agent: 'glob: support-*',
      model: 'glob: openai:*', since: '7d, 2026-11-01', until: '2026-11-20', status: 'intact, torn…', approval: 'granted|refused|pending|none',
      'min-cost': 'USD', 'forks-of': 'run id', text: 'in path, run id, agent, model, input'
    };
    const form = el('form', { class: 'filters', id: 'filters' });
    const inputs = {};
    for (const name of data.filter_names || []) {
      if (name === 'denied') {
        inputs[name] = el('input', { type: 'checkbox', name: name, checked: given[name] ? 'checked' : null });
        append(form, el('label', null, inputs[name], ' denied'));
        continue;
      }
      inputs[name] = el('input', { type: 'text', name: name, value: (given[name] || []).join(', '), placeholder: hints[name] || '' });
      append(form, el('label', null, name + ' ', inputs[name]));
    }
    append(form, el('button', { type: 'submit' }, 'Filter'), el('a', { href: '/', class: 'muted' }, 'clear'));
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      const pairs = [];
      for (const name of data.filter_names || []) {
        const input = inputs[name];
        if (name === 'denied') { if (input.checked) pairs.push([name, 'true']); continue; }
        const values = repeatable[name] ? input.value.split(',') : [input.value];
        for (const value of values) if (value.trim()) pairs.push([name, value.trim()]);
      }
      location.href = pageLink('/', pairs);
    });
    append(app, el('h1', null, 'Runs'), form);
    for (const policy of (data.served && data.served.policies) || []) {
      append(app, el('p', null, el('a', { href: pageLink('/audit', [['policy', policy]].concat(data.filters || [])), class: 'audit-link' },
        'audit the runs shown by ' + policy)));
    }
    if (data.index_failure) append(app, el('p', { class: 'banner-warn' }, 'indexing the watched directories failed: ' + data.index_failure));
    if (data.error) { append(app, el('p', { class: 'error', id: 'filter-error' }, data.error)); return; }
    const filters = data.filters || [];
    const selected = [];
    const compare = el('a', { class: 'compare-link', id: 'compare-link', hidden: 'hidden' }, 'compare the two selected');
    const body = el('tbody');
    function row(run) {
      const pick = el('input', { type: 'checkbox', 'aria-label': 'select to compare' });
      pick.addEventListener('change', function () {
        const at = selected.indexOf(run.path);
        if (pick.checked && at < 0) selected.push(run.path);
        if (!pick.checked && at >= 0) selected.splice(at, 1);
        while (selected.length > 2) selected.shift();
        compare.hidden = selected.length !== 2;
        if (selected.length === 2) compare.setAttribute('href', pageLink('/compare', [['a', selected[0]], ['b', selected[1]]]));
      });
      // No stop recorded says nothing of a writer: the list cannot tell a live run from one whose
      // writer died (its page can); the filter's word for it is still `running`.
      const stop = (run.stop_reason || 'no stop') + (run.limit ? ' (' + run.limit + ')' : '');
      return el('tr', { class: 'run-row', 'data-path': run.path },
        el('td', null, pick),
        el('td', null, time(run.started_at_us)),
        el('td', null, el('a', { href: run.page, class: 'run-link' }, run.agent || '?'), run.forked_from ? el('span', { class: 'muted' }, ' fork of ' + run.forked_from) : null),
        el('td', null, run.model || '?'),
        el('td', null, badge(stop, run.stop_reason && goodStops.indexOf(run.stop_reason) >= 0 ? 'ok' : 'warn')),
        el('td', { class: 'num' }, run.steps), el('td', { class: 'num' }, run.executed_calls + (run.denied_calls ? ' +' + run.denied_calls + ' denied' : '')),
        el('td', { class: 'num' }, run.tokens), el('td', { class: 'num' }, money(run.cost_usd)), el('td', null, run.status, fileNote(run)));
    }
    // A row is what the log held when it was indexed; one whose file differs now says so
    // (`file`, as `agent-eval runs` shows it).
    function fileNote(run) {
      const notes = { changed: 'file changed since it was indexed', grew: 'file grew since it was indexed' };
      if (run.file === 'vanished' && run.status !== 'vanished') notes.vanished = 'file gone';
      return notes[run.file] ? el('span', { class: 'muted file-note' }, ' (' + notes[run.file] + ')') : null;
    }
    function fill(runs) { for (const run of runs) append(body, row(run)); document.body.dataset.runs = String(body.children.length); }
    fill(data.runs || []);
    const table = el('table', { class: 'runs', id: 'runs' },
      el('thead', null, el('tr', null, ['', 'started', 'agent', 'model', 'stop', 'steps', 'calls', 'tokens', 'cost', 'log'].map(function (name) { return el('th', null, name); }))), body);
    const more = el('button', { id: 'more', hidden: data.next ? null : 'hidden' }, 'more');
    let next = data.next;
    let pagesLoaded = 1;
    more.addEventListener('click', function () {
      fetch(pageLink('/api/runs', filters.concat([['after', next]]))).then(function (response) { return response.json(); }).then(function (page) {
        fill(page.runs || []);
        next = page.next;
        pagesLoaded += 1;
        more.hidden = !next;
      });
    });
    append(app, compare, (data.runs || []).length ? table : el('p', { class: 'muted', id: 'no-runs' }, 'No indexed run matches.'), more);
    if (!(data.runs || []).length) append(app, table);
    // New and grown logs: the first page again, while only it is shown.
    const source = new EventSource(pageLink('/events/runs', [['after', data.indexed || '']]));
    source.addEventListener('indexed', function (event) {
      document.body.dataset.indexed = JSON.parse(event.data).generation;
      if (pagesLoaded > 1) return;
      fetch(pageLink('/api/runs', filters)).then(function (response) { return response.json(); }).then(function (page) {
        clear(body);
        fill(page.runs || []);
        next = page.next;
        more.hidden = !next;
        const none = document.getElementById('no-runs');
        if (none && (page.runs || []).length) none.remove();
      });
    });
  }

  const sectionOrder = [
    ['regressed', 'Regressions', 'failing now, passing in the baseline'],
    ['failed', 'Failures', ''],
    ['error', 'Could not run', 'the harness could not check these'],
    ['expired', 'Quarantine expired', 'failing the gate until released or extended'],
    ['known', 'Known failures', 'failing in the baseline too'],
    ['flaky', 'Flaky', 'passed on some attempts, failed on others'],
    ['quarantined', 'Quarantined', 'failing, not failing the gate'],
    ['passed', 'Passed', '']
  ];

  function caseSection(entry) {
    const status = entry.baseline && entry.baseline.status;
    const passes = entry.outcome === 'pass' || entry.outcome === 'flaky_pass';
    const quarantine = entry.quarantine;
    if (entry.outcome === 'error') return 'error';
    if (quarantine && quarantine.expired) return 'expired';
    if (quarantine && (!passes || status === 'regressed')) return 'quarantined';
    if (status === 'regressed') return 'regressed';
    if (!passes && status === 'known_failure') return 'known';
    if (entry.outcome === 'flaky_pass' || entry.outcome === 'flaky_fail') return 'flaky';
    if (!passes) return entry.stability === 'flaky' ? 'flaky' : 'failed';
    return 'passed';
  }

  // The runs a report's or a pipeline's page embeds (`data.runs`: [{log, run | error}]), one at
  // a time in a panel: `#run-N-step-M` and `#log=<log>&step=N` open run N (or the run of <log>)
  // at that step.
  function EmbeddedRuns(data) {
    this.runs = data.runs || [];
    this.byLog = {};
    this.runs.forEach(function (run, index) { this.byLog[run.log] = index; }, this);
    this.panel = el('div', { id: 'run-panel' });
  }

  // A link to run `log` at `step`, or null when the page does not embed it.
  EmbeddedRuns.prototype.link = function (log, step, attributes, text) {
    const index = this.byLog[log];
    if (index === undefined) return null;
    const options = Object.assign({ href: '#run-' + index + '-step-' + step, 'data-log': log }, attributes || {});
    return el('a', options, text === undefined ? log : text);
  };

  EmbeddedRuns.prototype.open = function (index, step) {
    const run = this.runs[index];
    const panel = this.panel;
    clear(panel);
    append(panel, el('h2', null, 'Run ', el('code', null, run.log)));
    if (run.error) { append(panel, el('p', { class: 'error' }, run.error)); return; }
    const viewer = new RunViewer(run.run, { prefix: 'run-' + index + '-' });
    append(panel, viewer.draw());
    activeViewer = viewer;
    panel.dataset.run = String(index);
    if (step === undefined || !viewer.showStep(step)) viewer.showIndex(0);
  };

  EmbeddedRuns.prototype.route = function () {
    // `#log=<log>&step=N`, as the `view:` lines of `agent-eval run --html` print it.
    if (location.hash.indexOf('#log=') === 0) {
      const query = new URLSearchParams(location.hash.slice(1));
      const index = this.byLog[query.get('log')];
      if (index !== undefined) { this.open(index, query.has('step') ? Number(query.get('step')) : undefined); return; }
    }
    const match = /^#run-(\d+)-step-(-?\d+)$/.exec(location.hash);
    if (match && this.runs[Number(match[1])]) {
      if (this.panel.dataset.run === match[1] && activeViewer) activeViewer.showStep(Number(match[2]));
      else this.open(Number(match[1]), Number(match[2]));
    }
  };

  EmbeddedRuns.prototype.start = function () {
    const self = this;
    window.addEventListener('hashchange', function () { self.route(); });
    this.route();
  };

  // The logs a page left out, with the command that shows each.
  function leftOutRuns(data, why) {
    if (!(data.runs_left_out || []).length) return null;
    return [el('h2', null, 'Runs not embedded'), el('p', { class: 'muted' }, why),
      el('pre', { class: 'runs-left-out' }, data.runs_left_out.map(function (log) { return 'agent-eval view ' + log; }).join('\n'))];
  }

  function drawReportPage(app, data) {
    const results = data.results || {};
    const summary = results.summary || {};
    const cases = results.cases || [];
    const embedded = new EmbeddedRuns(data);
    const runsByLog = embedded.byLog;
    append(app, el('h1', null, 'Eval report'));
    append(app, el('div', { class: 'facts' }, fact('cases', summary.cases), fact('passed', summary.passed), fact('failed', summary.failed),
      fact('could not run', summary.errors || undefined), fact('regressed', summary.regressed), fact('known failures', summary.known_failures),
      fact('k', results.k > 1 ? results.k : undefined), fact('duration', summary.duration_ms !== undefined ? summary.duration_ms + ' ms' : undefined)));
    // The verdict the exit status was decided with (a report without one is an older report).
    const verdict = results.verdict;
    const bad = verdict ? verdict.exit_status !== 0 : (summary.failed || 0) + (summary.errors || 0) > 0;
    append(app, el('p', { class: bad ? 'banner-bad' : 'banner-ok', id: 'verdict' }, verdict
      ? verdict.line + ' (exit ' + verdict.exit_status + ')'
      : bad ? summary.passed + ' of ' + summary.cases + ' cases passed' : '✔ all ' + summary.cases + ' cases passed'));
    const groups = {};
    for (const entry of cases) (groups[caseSection(entry)] = groups[caseSection(entry)] || []).push(entry);
    for (const section of sectionOrder) {
      const entries = groups[section[0]];
      if (!entries) continue;
      append(app, el('h2', { class: 'section-title', id: 'section-' + section[0] }, section[1] + ' ', el('span', { class: 'count' }, '(' + entries.length + ')' + (section[2] ? ' — ' + section[2] : ''))));
      const table = el('table', { class: 'cases' },
        el('tr', null, ['', 'case', 'file', 'source', 'runs', 'pass rate', 'pass^k', 'stop', 'baseline'].map(function (name) { return el('th', null, name); })));
      for (const entry of entries) drawCaseRows(table, entry, runsByLog, section[0] !== 'passed');
      append(app, table);
    }
    append(app, leftOutRuns(data, 'The page holds the runs of failing cases first, up to a size limit; see these with agent-eval view:'));
    if ((data.pipelines || []).length) {
      append(app, [el('h2', null, 'Pipeline runs'),
        el('p', { class: 'muted' }, 'A pipeline run has a page of its own, with its task graph and each task\'s run:'),
        el('pre', { class: 'runs-left-out' }, data.pipelines.map(function (log) { return 'agent-eval view ' + log; }).join('\n'))]);
    }
    append(app, embedded.panel);
    embedded.start();
  }

  function drawCaseRows(table, entry, runsByLog, open) {
    const runs = entry.runs || [];
    const stops = Array.from(new Set(runs.map(function (run) { return run.stop_reason || run.pipeline_status; }).filter(Boolean))).join(', ');
    const baseline = entry.baseline ? entry.baseline.status : '';
    const row = el('tr', { class: 'case-row', id: 'case-' + entry.case_id, 'data-case': entry.case_id },
      el('td', null, badge(entry.outcome)), el('td', null, el('b', null, entry.case_id)),
      el('td', { class: 'mono muted' }, entry.file + (entry.line ? ':' + entry.line : '')), el('td', null, entry.source),
      el('td', { class: 'num' }, runs.length), el('td', { class: 'num' }, Math.round((entry.pass_rate || 0) * 100) + '%'),
      el('td', { class: 'num' }, entry.pass_hat_k === undefined ? '–' : Math.round(entry.pass_hat_k * 100) + '%'),
      el('td', null, stops || '–'), el('td', null, baseline ? badge(baseline.replace(/_/g, ' '), baseline) : '–'));
    const detail = el('tr', { class: 'case-detail' }, el('td', { colspan: 9 }, caseDetail(entry, runsByLog)));
    detail.hidden = !open;
    row.addEventListener('click', function () { detail.hidden = !detail.hidden; });
    append(table, row);
    append(table, detail);
  }

  function caseDetail(entry, runsByLog) {
    const box = el('div');
    if (entry.description) append(box, el('div', { class: 'muted' }, entry.description));
    if (entry.error) append(box, el('div', { class: 'problem' }, 'error: ' + entry.error));
    if (entry.quarantine) {
      const q = entry.quarantine;
      append(box, el('div', { class: q.expired ? 'problem' : 'muted' }, (q.expired ? 'quarantine expired: ' : 'quarantined: ') + 'owner ' + q.owner + ', until ' + q.until + ': ' + q.reason));
    }
    if (entry.attempts) append(box, el('div', { class: 'muted' }, 'attempts: ' + entry.attempts.passed + ' passed, ' + entry.attempts.failed + ' failed' + (entry.attempts.could_not_run ? ', ' + entry.attempts.could_not_run + ' could not run' : '')));
    const passRate = entry.baseline && entry.baseline.pass_rate;
    if (passRate) {
      const pct = function (x) { return Math.round(x * 100) + '%'; };
      append(box, el('div', { class: passRate.significant ? 'problem' : 'muted' }, 'pass rate ' + passRate.current.passes + '/' + passRate.current.attempts +
        ' (' + pct(passRate.current.interval[0]) + '–' + pct(passRate.current.interval[1]) + ') vs ' + passRate.baseline.passes + '/' + passRate.baseline.attempts +
        ' in the baseline (' + pct(passRate.baseline.interval[0]) + '–' + pct(passRate.baseline.interval[1]) + '): ' + passRate.test + ' p = ' + passRate.p_value.toPrecision(2)));
    }
    for (const regression of (entry.baseline && entry.baseline.regressions) || []) {
      append(box, el('div', { class: 'problem' }, 'regression: ' + regression.message));
    }
    for (const disagreement of entry.judge_disagreements || []) append(box, el('div', { class: 'problem' }, 'judges disagree: ' + (disagreement.message || oneLine(disagreement))));
    for (const run of entry.runs || []) {
      const index = runsByLog[run.log];
      append(box, el('div', null, badge(run.outcome), ' ', run.repeat ? 'run ' + run.repeat + ': ' : '',
        index !== undefined ? el('a', { href: '#run-' + index + '-step-' + firstStep(run), class: 'run-link' }, run.log)
          : servedPages ? el('a', { href: runPageLink(run.log, firstStep(run)), class: 'run-link' }, run.log) : el('code', null, run.log),
        run.steps !== undefined ? el('span', { class: 'muted' }, ' · ' + run.steps + ' steps · ' + (run.tokens || 0) + ' tokens') : null));
      if (run.error) append(box, el('div', { class: 'problem' }, run.error));
      for (const failure of run.failures || []) {
        const log = failure.log || run.log;
        const target = runsByLog[log];
        append(box, el('div', { class: 'failure' },
          el('div', null, '✘ ', el('b', null, failure.expectation), ': expected ' + failure.expected),
          el('div', null, el('span', { class: 'muted' }, 'happened: '), failure.actual),
          el('div', null, failure.step !== undefined && (target !== undefined || servedPages)
            ? el('a', { class: 'failure-link', href: target !== undefined ? '#run-' + target + '-step-' + failure.step : runPageLink(log, failure.step), 'data-step': failure.step, 'data-log': log }, '→ step ' + failure.step + (failure.call_id ? ' (' + failure.call_id + ')' : ''))
            : null, ' ', el('code', { class: 'muted' }, failure.replay || ''))));
      }
      for (const note of run.notes || []) append(box, el('div', { class: 'muted' }, 'note: ' + note));
      for (const judgement of run.judgements || []) {
        append(box, el('div', { class: 'muted' }, 'judge ' + (judgement.passed === true ? '✔' : judgement.passed === false ? '✘' : '!') + ' ' +
          judgement.expectation + ' by ' + judgement.judge + ': ' + (judgement.reason || judgement.error || '')));
      }
    }
    return box;
  }

  function firstStep(run) {
    const failure = (run.failures || []).find(function (item) { return item.step !== undefined; });
    return failure ? failure.step : 0;
  }

  // ---------------------------------------------------------------- a pipeline
  // A pipeline run as `pipeline show --json` sees it: its outcome, the task graph in layers (a
  // task sits one layer after the last of the tasks it needs), each task's attempts, and the
  // child run of every agent attempt, embedded and opened below like a report's runs.
  const taskStatusKind = { succeeded: 'ok', failed: 'bad', skipped: 'warn', routed: 'warn', retrying: 'warn', running: 'warn' };

  function drawPipelinePage(app, data) {
    const doc = data.pipeline || {};
    const state = doc.state || {};
    const summary = data.summary || {};
    const stop = state.stop || null;
    const plan = doc.plan || [];
    const tasks = state.tasks || [];
    const taskById = {};
    for (const task of tasks) taskById[task.id] = task;
    const childLog = {};
    for (const child of summary.child_logs || []) childLog[child.task + '#' + child.attempt] = child.log;
    const embedded = new EmbeddedRuns(data);
    const directory = summary.directory || '.';

    append(app, el('h1', null, 'Pipeline ' + (doc.pipeline || '')));
    const attempts = tasks.reduce(function (sum, task) { return sum + (task.attempts || []).length; }, 0);
    append(app, el('div', { class: 'facts' }, fact('log', doc.log), fact('run', doc.run), fact('status', doc.status),
      fact('tasks', tasks.length), fact('attempts', attempts), fact('child runs', (summary.child_logs || []).length),
      fact('events', doc.events), fact('duration', doc.duration_us !== undefined ? duration(doc.duration_us) : undefined)));
    const mismatches = doc.digest_mismatches || [];
    const anomalies = doc.anomalies || [];
    const childProblems = doc.child_log_problems || [];
    const checked = (doc.digests_checked || 0) + ' state digests checked';
    let banner;
    if (summary.ok) {
      banner = el('p', { class: 'banner-ok' }, '✔ the pipeline succeeded; rebuilt from its log alone, ' + checked + ', all match the rebuilt state');
    } else if (summary.outcome === 'failed') {
      banner = el('p', { class: 'banner-bad' }, '✘ the pipeline failed' + (stop && stop.task ? ' at ' + stop.task : '') + (stop && stop.error ? ': ' + stop.error : ''));
    } else if (summary.outcome === 'succeeded') {
      const findings = [];
      if (mismatches.length || anomalies.length) {
        findings.push(mismatches.length + ' of ' + checked + ' differ', anomalies.length + ' events do not fit the pipeline state');
      }
      if (childProblems.length) findings.push(childProblems.length + ' child log' + (childProblems.length === 1 ? ' is' : 's are') + ' missing or damaged');
      banner = el('p', { class: 'banner-bad' }, 'the pipeline succeeded, but its record does not check out: ' + findings.join(', '));
    } else if (summary.outcome === 'paused') {
      banner = el('p', { class: 'banner-warn' }, 'paused; continue it with agent-eval pipeline resume ' + directory);
    } else {
      banner = el('p', { class: 'banner-warn' }, 'the log ends while tasks ran (the process stopped); continue it with agent-eval pipeline resume ' + directory);
    }
    banner.id = 'pipeline-banner';
    banner.dataset.outcome = String(summary.outcome);
    append(app, banner);
    if (state.forked) {
      append(app, el('p', { class: 'banner-warn', id: 'pipeline-fork' }, 'a fork of pipeline run ', el('code', null, state.forked.parent_run_id),
        ' (' + state.forked.copied_events + ' events copied' + (state.forked.parent_log ? ' from ' + state.forked.parent_log : '') +
        '); the tasks it ran again are the rolled back ones below'));
    }
    if (mismatches.length) {
      append(app, el('div', { class: 'panel' }, el('h3', null, 'State digests that differ'),
        el('ul', { class: 'items' }, mismatches.map(function (line) { return el('li', { class: 'problem mono' }, line); }))));
    }
    if (anomalies.length) {
      append(app, el('div', { class: 'panel' }, el('h3', null, 'Events that do not fit the pipeline state'),
        el('ul', { class: 'items' }, anomalies.map(function (line) { return el('li', { class: 'problem mono' }, line); }))));
    }
    if (childProblems.length) {
      append(app, el('div', { class: 'panel', id: 'child-log-problems' }, el('h3', null, 'Child logs missing or damaged'),
        el('ul', { class: 'items' }, childProblems.map(function (line) { return el('li', { class: 'problem mono' }, line); }))));
    }
    if (stop && stop.outputs !== undefined) append(app, el('div', null, el('span', { class: 'muted' }, 'outputs '), payload(stop.outputs)));

    append(app, el('h2', null, 'Task graph'));
    append(app, taskGraph(plan, taskById));
    append(app, el('h2', null, 'Tasks'));
    const table = el('table', { class: 'pipeline-tasks' },
      el('tr', null, ['task', 'kind', 'needs', 'status', 'attempts', 'duration', 'output'].map(function (name, index) {
        return el('th', { class: index === 4 || index === 5 ? 'num' : '' }, name);
      })));
    for (const step of plan) {
      const task = taskById[step.id] || { id: step.id, status: 'pending', attempts: [] };
      const total = (task.attempts || []).reduce(function (sum, attempt) { return sum + (attempt.duration_us || 0); }, 0);
      append(table, el('tr', { class: 'task-row', id: 'task-' + step.id, 'data-task': step.id, 'data-status': task.status },
        el('td', null, el('b', null, step.id), (step.fallback_for || []).length ? el('div', { class: 'muted' }, 'fallback for ' + step.fallback_for.join(', ')) : null,
          step.breaker ? el('div', { class: 'muted' }, 'breaker ' + step.breaker) : null),
        el('td', null, step.kind),
        el('td', null, (step.needs || []).length ? step.needs.map(function (need, index) {
          return [index ? ', ' : '', el('a', { href: '#task-' + need, class: 'need' }, need)];
        }) : '–'),
        el('td', null, badge(task.status, taskStatusKind[task.status] || ''), task.output_from ? el('div', { class: 'muted' }, 'output from ' + task.output_from) : null),
        el('td', { class: 'num' }, (task.attempts || []).length),
        el('td', { class: 'num' }, (task.attempts || []).length ? duration(total) : '–'),
        el('td', { class: 'mono' }, task.output === undefined ? '–' : shorten(oneLine(task.output), 160))));
      for (const attempt of task.attempts || []) {
        const log = childLog[step.id + '#' + attempt.attempt];
        const status = attempt.status || 'unfinished';
        append(table, el('tr', { class: 'attempt-row' + (attempt.discarded ? ' discarded' : ''), 'data-task': step.id, 'data-attempt': attempt.attempt },
          el('td', { colspan: 7 },
            el('div', { class: 'attempt' },
              el('span', null, 'attempt ' + attempt.attempt), ' ',
              badge(status, status === 'succeeded' ? 'ok' : status === 'failed' ? 'bad' : 'warn'),
              attempt.discarded ? [' ', badge('discarded by rollback', 'warn')] : null,
              attempt.fallback_for ? ' for ' + attempt.fallback_for : '',
              attempt.duration_us !== undefined ? ' in ' + duration(attempt.duration_us) : '',
              attempt.error_class ? [' ', badge(attempt.error_class, 'bad')] : null,
              attempt.recovery ? ' → ' + attempt.recovery : '',
              log ? [' · ', embedded.link(log, 0, { class: 'run-link', 'data-task': step.id, 'data-attempt': attempt.attempt }, 'run ' + (attempt.run || log)) ||
                el('code', { class: 'muted' }, 'agent-eval view ' + log)] : null),
            attempt.error ? el('div', { class: 'problem' }, attempt.error) : null)));
      }
    }
    append(app, table);
    const breakers = Object.keys(state.breakers || {});
    if (breakers.length) {
      append(app, el('h2', null, 'Breakers'));
      append(app, el('ul', { class: 'items' }, breakers.map(function (key) {
        const breaker = state.breakers[key];
        return el('li', null, el('code', null, key), ' ', badge(breaker.state, breaker.state === 'closed' ? 'ok' : 'bad'), ' ', breaker.reason || '');
      })));
    }
    if ((state.rollbacks || []).length) {
      append(app, el('h2', null, 'Rollbacks'));
      append(app, el('ul', { class: 'items' }, state.rollbacks.map(function (rollback) {
        return el('li', null, 'rolled back to ', el('code', null, rollback.to), ': discarded ' + (rollback.discarded || []).join(', '));
      })));
    }
    append(app, leftOutRuns(data, 'The page holds child runs up to a size limit, or could not find these logs; see them with agent-eval view:'));
    append(app, embedded.panel);
    embedded.start();
  }

  // The tasks in layers: a task without needs is in the first, any other one layer after the
  // last of the tasks it needs. The plan is a DAG (pipeline check refuses cycles).
  function taskGraph(plan, taskById) {
    const byId = {};
    for (const step of plan) byId[step.id] = step;
    const layer = {};
    function depth(id, seen) {
      if (layer[id] !== undefined) return layer[id];
      if (seen[id] || !byId[id]) return 0;
      seen[id] = true;
      let deepest = -1;
      for (const need of byId[id].needs || []) deepest = Math.max(deepest, depth(need, seen));
      layer[id] = deepest + 1;
      return layer[id];
    }
    const layers = [];
    for (const step of plan) {
      const index = depth(step.id, {});
      (layers[index] = layers[index] || []).push(step);
    }
    return el('div', { class: 'task-graph' }, layers.map(function (steps, index) {
      return el('div', { class: 'task-layer', 'data-layer': index }, (steps || []).map(function (step) {
        const task = taskById[step.id] || { status: 'pending', attempts: [] };
        const total = (task.attempts || []).reduce(function (sum, attempt) { return sum + (attempt.duration_us || 0); }, 0);
        return el('a', { class: 'task-node ' + (taskStatusKind[task.status] || ''), href: '#task-' + step.id, 'data-task': step.id },
          el('b', null, step.id), ' ', badge(task.status, taskStatusKind[task.status] || ''),
          el('div', { class: 'muted' }, step.kind + ' · ' + (task.attempts || []).length + ' attempt' + ((task.attempts || []).length === 1 ? '' : 's') +
            ((task.attempts || []).length ? ' · ' + duration(total) : '')),
          (step.needs || []).length ? el('div', { class: 'muted' }, '← ' + step.needs.join(', ')) : null,
          (step.fallback_for || []).length ? el('div', { class: 'muted' }, 'fallback for ' + step.fallback_for.join(', ')) : null);
      }));
    }));
  }

  function drawDiffPage(app, data) {
    const diff = data.diff || {};
    const first = diff.first_divergence;
    const summary = diff.summary || {};
    const problems = diff.problems || {};
    const unchecked = (problems.left || []).length + (problems.right || []).length;
    append(app, el('h1', null, diff.same ? 'Same trajectory' : first ? 'The runs diverge' : 'A log does not check out'));
    append(app, el('div', { class: 'facts' }, fact('A', diff.left), fact('B', diff.right)));
    // A log whose digests or events do not check out is never the same trajectory as another.
    for (const side of [['A', problems.left || []], ['B', problems.right || []]]) {
      if (!side[1].length) continue;
      append(app, el('div', { class: 'banner-bad diff-problems', 'data-side': side[0] },
        el('div', null, side[0] + ' does not check out (replay shows where):'),
        el('ul', { class: 'items' }, side[1].map(function (line) { return el('li', { class: 'problem mono' }, line); }))));
    }
    if (first) {
      const where = [first.left_step !== undefined ? 'step ' + first.left_step + ' of A' : null, first.right_step !== undefined ? 'step ' + first.right_step + ' of B' : null].filter(Boolean).join(' / ');
      append(app, el('div', { class: 'banner-warn', id: 'first-divergence' },
        el('div', null, 'first divergence: ' + where + ': ', el('b', null, first.path)),
        el('div', { class: 'mono' }, 'A: ' + first.left), el('div', { class: 'mono' }, 'B: ' + first.right)));
    } else if (!unchecked) {
      append(app, el('p', { class: 'banner-ok' }, 'the same decisions, verdicts, results and stop'));
    }
    append(app, el('table', { class: 'totals' }, el('tr', null, el('th'), el('th', null, 'A'), el('th', null, 'B')),
      el('tr', null, el('th', null, 'stop'), el('td', null, summary.left_stop || 'none'), el('td', null, summary.right_stop || 'none')),
      el('tr', null, el('th', null, 'tokens'), el('td', null, summary.left_tokens), el('td', null, summary.right_tokens)),
      el('tr', null, el('th', null, 'duration'), el('td', null, duration(summary.left_duration_us)), el('td', null, duration(summary.right_duration_us)))));
    const rows = diff.rows || [];
    const firstRow = first ? rows.findIndex(function (row) { return row.left_step === first.left_step && row.right_step === first.right_step; }) : -1;
    const table = el('table', { class: 'diff-rows' }, el('tr', null, el('th'), el('th', null, 'A step'), el('th', null, 'A'), el('th', null, 'B step'), el('th', null, 'B')));
    const pair = el('div', { class: 'diff-grid', id: 'diff-steps' });
    const leftIndex = indexSteps(data.left), rightIndex = indexSteps(data.right);
    const leftContext = { prefix: 'a-', contents: contentsOf(data.left || {}), highlight: null };
    const rightContext = { prefix: 'b-', contents: contentsOf(data.right || {}), highlight: null };
    const rowNodes = rows.map(function (row, index) {
      const mark = row.same ? '=' : (row.left_step === undefined ? '+' : (row.right_step === undefined ? '−' : '≠'));
      const node = el('tr', { class: (row.same ? '' : 'differs') + (index === firstRow ? ' first' : ''), id: 'row-' + index, 'data-row': index },
        el('td', { class: 'mark' }, mark), el('td', { class: 'num' }, row.left_step === undefined ? '–' : row.left_step), el('td', null, row.left || '(no step)'),
        el('td', { class: 'num' }, row.right_step === undefined ? '–' : row.right_step), el('td', null, row.right || '(no step)'));
      node.addEventListener('click', function () { select(index); });
      append(table, node);
      return node;
    });
    append(app, el('h2', null, 'Steps, aligned'));
    append(app, table);
    append(app, el('h2', null, 'Side by side'));
    append(app, pair);
    let selected = -1;
    function select(index) {
      if (index < 0 || index >= rows.length) return;
      if (selected >= 0) rowNodes[selected].classList.remove('selected');
      selected = index;
      rowNodes[index].classList.add('selected');
      const row = rows[index];
      const highlight = index === firstRow && first ? { callId: first.call_id, field: first.field } : null;
      leftContext.highlight = highlight;
      rightContext.highlight = highlight;
      clear(pair);
      append(pair, el('div', { class: 'side left' }, el('h3', null, 'A'), row.left_step !== undefined && leftIndex[row.left_step] ? stepCard(leftIndex[row.left_step], leftContext) : el('p', { class: 'muted' }, '(no step in A)')));
      append(pair, el('div', { class: 'side right' }, el('h3', null, 'B'), row.right_step !== undefined && rightIndex[row.right_step] ? stepCard(rightIndex[row.right_step], rightContext) : el('p', { class: 'muted' }, '(no step in B)')));
      history.replaceState(null, '', '#row-' + index);
      document.body.dataset.selectedRow = String(index);
    }
    activeViewer = {
      key: function (event) {
        if (event.key === 'n' || event.key === 'j') { select(selected + 1); return true; }
        if (event.key === 'p' || event.key === 'k') { select(selected - 1); return true; }
        if (event.key === 'f' && firstRow >= 0) { select(firstRow); pair.scrollIntoView(); return true; }
        return false;
      }
    };
    const match = /^#row-(\d+)$/.exec(location.hash);
    select(match ? Number(match[1]) : (firstRow >= 0 ? firstRow : 0));
  }

  function indexSteps(doc) {
    const index = {};
    for (const step of (doc && doc.steps) || []) index[step.step] = step;
    return index;
  }

  // ---------------------------------------------------------------- keys and start
  function drawHelp() {
    const help = el('aside', { class: 'help', id: 'help', role: 'dialog', 'aria-label': 'keys' },
      el('h3', null, 'Keys'),
      el('dl', null,
        [['n / j', 'next step (diff: next row)'], ['p / k', 'previous step'], ['f', 'next failure, denial or error (diff: the first divergence)'],
          ['F', 'previous failure'], ['g', 'jump to a step'], ['/', 'search tools and arguments; Enter: next match'], ['?', 'this help'], ['Esc', 'close']]
          .map(function (pair) { return [el('dt', null, pair[0]), el('dd', null, pair[1])]; })));
    help.hidden = true;
    append(document.body, help);
    document.getElementById('keys-hint').addEventListener('click', function () { help.hidden = !help.hidden; });
    document.addEventListener('keydown', function (event) {
      const target = event.target;
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      if (target && (target.tagName === 'INPUT' || target.tagName === 'TEXTAREA')) return;
      if (event.key === '?') { help.hidden = !help.hidden; event.preventDefault(); return; }
      if (event.key === 'Escape') { help.hidden = true; return; }
      if (activeViewer && activeViewer.key(event)) event.preventDefault();
    });
  }

  async function loadData() {
    const holder = document.getElementById('agent-eval-data');
    const text = holder.textContent;
    if (holder.dataset.encoding === 'gzip+base64') {
      const binary = atob(text);
      const bytes = new Uint8Array(binary.length);
      for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
      return JSON.parse(await new Response(stream).text());
    }
    return JSON.parse(text);
  }

  async function start() {
    const app = document.getElementById('app');
    let data;
    try {
      data = await loadData();
    } catch (error) {
      clear(app);
      append(app, el('p', { class: 'error' }, 'This page\'s data could not be read (' + error + '). Make the page again with agent-eval.'));
      document.body.dataset.ready = 'error';
      return;
    }
    clear(app);
    drawHelp();
    if (data.served) servedNavigation(data);
    if (data.view === 'run') drawRunPage(app, data);
    else if (data.view === 'runs') drawRunsPage(app, data);
    else if (data.view === 'approvals') drawApprovalsPage(app, data);
    else if (data.view === 'suites') drawSuitesPage(app, data);
    else if (data.view === 'case') drawCasePage(app, data);
    else if (data.view === 'audit') drawAuditPage(app, data);
    else if (data.view === 'report') drawReportPage(app, data);
    else if (data.view === 'diff') drawDiffPage(app, data);
    else if (data.view === 'pipeline') drawPipelinePage(app, data);
    else append(app, el('p', { class: 'error' }, 'This page holds a view this viewer does not know: ' + data.view));
    document.body.dataset.view = String(data.view);
    document.body.dataset.ready = 'true';
  }

  start();
})();
