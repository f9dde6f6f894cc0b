// fanout.js — the peer of `bench_engine fanout`: N process instances of a BPMN parallel gateway
// that splits into 32 tasks and joins them in a second parallel gateway, on the npm package
// bpmn-engine, all started at once. The XML is parsed once (bpmn-moddle) and the parsed context
// shared by every instance, so parsing is not counted. Counts every activity that ended (start
// event, gateways, tasks, end event) and prints activities per second.
// usage: node fanout.js [INSTANCES]
'use strict';
const { Engine } = require('bpmn-engine');
const BpmnModdle = require('bpmn-moddle');

const N = parseInt(process.argv[2] || '500', 10);
let tasks = '', flows = '';
for (let i = 0; i < 32; i++) {
  tasks += `<task id="B${i}" />`;
  flows += `<sequenceFlow id="s${i}" sourceRef="split" targetRef="B${i}" />` +
           `<sequenceFlow id="j${i}" sourceRef="B${i}" targetRef="join" />`;
}
const source = `<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" id="fanout32" targetNamespace="http://xgr/bench">
  <process id="fanout" isExecutable="true">
    <startEvent id="start" />
    <sequenceFlow id="f0" sourceRef="start" targetRef="split" />
    <parallelGateway id="split" />
    ${tasks}
    <parallelGateway id="join" />
    ${flows}
    <sequenceFlow id="f1" sourceRef="join" targetRef="end" />
    <endEvent id="end" />
  </process>
</definitions>`;

async function main() {
  const moddleContext = await new BpmnModdle().fromXML(source);
  let activities = 0;
  const t0 = process.hrtime.bigint();
  const runs = [];
  for (let i = 0; i < N; i++) {
    const engine = new Engine({ name: `fanout-${i}`, moddleContext });
    runs.push(new Promise((resolve, reject) => {
      engine.once('end', resolve);
      engine.once('error', reject);
      engine.broker.subscribeTmp('event', 'activity.end', () => { activities++; }, { noAck: true });
      engine.execute().catch(reject);
    }));
  }
  await Promise.all(runs);
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`bpmn-engine fanout: ${N} instances, ${activities} activities in ${dt.toFixed(3)} s = ` +
              `${Math.round(activities / dt)} activities/s`);
}
main().catch((e) => { console.error(e); process.exit(1); });
