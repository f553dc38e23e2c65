(function(){
  var head = document.body.getAttribute('data-head');
  var note = document.getElementById('live-note');
  function say(text){ if (note) note.textContent = text; }
  function writing(main){
    // A redraw would throw away what the reader is typing or choosing: wait until the
    // form is sent or emptied.
    var a = document.activeElement;
    if (a && main.contains(a) && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName)) return true;
    return Array.prototype.some.call(main.querySelectorAll('textarea, input[type=text]'),
      function(f){ return f.value !== ''; });
  }
  function swap(text){
    var doc = new DOMParser().parseFromString(text, 'text/html');
    var fresh = doc.querySelector('main'), now = document.querySelector('main');
    if (!fresh || !now) return;
    var open = Array.prototype.map.call(now.querySelectorAll('details[open]'),
      function(d){ return d.id; });
    now.innerHTML = fresh.innerHTML;
    open.forEach(function(id){ var d = id && document.getElementById(id); if (d) d.open = true; });
  }
  function poll(){
    fetch('/api/head', {cache: 'no-store'}).then(function(r){ return r.json(); })
    .then(function(h){
      if (String(h.seq) === head) return;
      if (writing(document.querySelector('main'))) {
        say('live · paused while you write (ledger event ' + h.seq + ')');
        return;
      }
      return fetch(location.href, {cache: 'no-store'}).then(function(r){ return r.text(); })
        .then(function(t){ swap(t); head = String(h.seq); say('live · ledger event ' + head); });
    }).catch(function(){ say('live · server not reachable'); })
    .then(function(){ setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
})();
