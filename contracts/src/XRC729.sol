// SPDX-License-Identifier: MIT
// xgr's own XRC-729 orchestration registry: the interface and events of
// XRC-729_Smart_Contract_Standard.md §5.4, executor extension included.
// OSTC documents are stored as the exact UTF-8 JSON strings given to setOSTC;
// xgr pins keccak-256 of the bytes getOSTC returns.
pragma solidity ^0.8.0;

contract XRC729 {
    event OSTCSet(string indexed id);
    event OSTCDeleted(string indexed id);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event ExecutorAdded(address indexed executor);
    event ExecutorRemoved(address indexed executor);

    string public nameXRC;
    address public owner;

    mapping(string => string) private ostcJSON;
    mapping(string => bool) private present;
    string[] private ostcIds;
    mapping(string => uint256) private idIndex; // position + 1 in ostcIds

    address[] private executorList;
    mapping(address => uint256) private execIndex; // position + 1 in executorList

    modifier onlyOwner() {
        require(msg.sender == owner, "XRC729: not owner");
        _;
    }

    constructor(string memory name_) {
        nameXRC = name_;
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    function getNameXRC() external view returns (string memory) {
        return nameXRC;
    }

    function hasOSTC(string calldata id) external view returns (bool) {
        return present[id];
    }

    function getOSTC(string calldata id) external view returns (string memory json) {
        require(present[id], "XRC729: unknown ostcId");
        return ostcJSON[id];
    }

    function getAllOSTC() external view returns (string[] memory) {
        return ostcIds;
    }

    function setOSTC(string calldata id, string calldata json) external onlyOwner {
        require(bytes(id).length != 0, "XRC729: empty ostcId");
        if (!present[id]) {
            present[id] = true;
            ostcIds.push(id);
            idIndex[id] = ostcIds.length;
        }
        ostcJSON[id] = json;
        emit OSTCSet(id);
    }

    function deleteOSTC(string calldata id) external onlyOwner {
        require(present[id], "XRC729: unknown ostcId");
        uint256 pos = idIndex[id] - 1;
        uint256 last = ostcIds.length - 1;
        if (pos != last) {
            string memory moved = ostcIds[last];
            ostcIds[pos] = moved;
            idIndex[moved] = pos + 1;
        }
        ostcIds.pop();
        delete idIndex[id];
        delete present[id];
        delete ostcJSON[id];
        emit OSTCDeleted(id);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "XRC729: zero owner");
        if (execIndex[newOwner] != 0) {
            _removeExecutor(newOwner);
        }
        address previous = owner;
        owner = newOwner;
        emit OwnershipTransferred(previous, newOwner);
    }

    function addExecutor(address exec) external onlyOwner {
        require(exec != address(0), "XRC729: zero executor");
        require(exec != owner, "XRC729: owner is implicit");
        if (execIndex[exec] != 0) {
            return;
        }
        executorList.push(exec);
        execIndex[exec] = executorList.length;
        emit ExecutorAdded(exec);
    }

    function removeExecutor(address exec) external onlyOwner {
        if (execIndex[exec] == 0) {
            return;
        }
        _removeExecutor(exec);
    }

    function getExecutorList() external view returns (address[] memory) {
        return executorList;
    }

    function _removeExecutor(address exec) private {
        uint256 pos = execIndex[exec] - 1;
        uint256 last = executorList.length - 1;
        if (pos != last) {
            address moved = executorList[last];
            executorList[pos] = moved;
            execIndex[moved] = pos + 1;
        }
        executorList.pop();
        delete execIndex[exec];
        emit ExecutorRemoved(exec);
    }
}
